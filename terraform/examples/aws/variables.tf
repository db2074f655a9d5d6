variable "region" {
  description = "AWS region."
  type        = string
  nullable    = false
}

variable "cluster_name" {
  description = "Name of the cluster; prefixes the names of IAM roles, instances and the bucket."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,30}$", var.cluster_name))
    error_message = "cluster_name must be 1-31 lowercase letters, digits or \"-\", starting with a letter."
  }
}

variable "ami_id" {
  description = "Flatcar Container Linux AMI for the nodes."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^ami-[0-9a-f]{8,17}$", var.ami_id))
    error_message = "ami_id must be an AMI id (ami-...)."
  }
}

variable "subnet_id" {
  description = "Subnet of the nodes (with a route to S3: a gateway endpoint or NAT)."
  type        = string
  nullable    = false
}

variable "security_group_ids" {
  description = "Security groups of the nodes."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "master_instance_type" {
  description = "Instance type of the bootkube master."
  type        = string
  default     = "m5.large"
  nullable    = false
}

variable "worker_instance_type" {
  description = "Instance type of the workers."
  type        = string
  default     = "m5.large"
  nullable    = false
}

variable "worker_count" {
  description = "Number of workers."
  type        = number
  default     = 2
  nullable    = false

  validation {
    condition     = var.worker_count >= 0 && floor(var.worker_count) == var.worker_count
    error_message = "worker_count must be a whole number >= 0."
  }
}

variable "assets_bundle_path" {
  description = "Local path of the asset bundle (tar -C generated -czf assets.tar.gz .), pulled by the bootkube master from S3."
  type        = string
  nullable    = false
}

variable "agent_url" {
  description = "URL of the node-bootstrap binary (https:// mirror, or s3:// readable by the nodes' roles)."
  type        = string
  nullable    = false
}

variable "agent_sha512" {
  description = "SHA-512 (hex) of the binary at agent_url."
  type        = string
  nullable    = false
}

variable "agent_config" {
  description = "The agent's config shared by all nodes, as an object (role, assets.mode and assets.s3 are set here per node)."
  type        = any
  default     = {}
  nullable    = false
}

variable "kubelet_image_url" {
  description = "Kubelet image repository (seed kubelet.env)."
  type        = string
  default     = "quay.io/coreos/hyperkube"
  nullable    = false
}

variable "kubelet_image_tag" {
  description = "Seed kubelet.env's KUBELET_IMAGE_TAG: the cluster's Kubernetes version as an image tag (\"+\" as \"_\"), e.g. \"v1.31.4\". The bootkube master takes the cluster's version from it; the workers ask the API server."
  type        = string
  nullable    = false
}

variable "runtime_mappings_path" {
  description = "Path of runtime-mappings.yaml."
  type        = string
  nullable    = false
}

variable "keyring_path" {
  description = "Path of the armored OpenPGP keyring for signed metadata. null: none."
  type        = string
  default     = null
}

variable "kubeconfig_path" {
  description = "Path of the nodes' kubeconfig with long-lived credentials: every node's, or only the master's with bootstrap_token."
  type        = string
  nullable    = false
}

variable "bootstrap_token" {
  description = "A bootstrap token the workers start with instead of the kubeconfig at kubeconfig_path (recommended: a worker then holds no long-lived credential; docs/operators.md, \"Node credentials\"): id (6 characters of [a-z0-9]), secret (16), expiration (RFC 3339). The server and CA of the workers' bootstrap kubeconfig are those of kubeconfig_path's first cluster. The token's Secret and the RBAC must be among the assets' manifests. null: every node gets kubeconfig_path."
  type = object({
    id         = string
    secret     = string
    expiration = string
  })
  default   = null
  sensitive = true
}

variable "ssh_authorized_keys" {
  description = "SSH public keys for the core user (for debugging; pull mode needs no SSH)."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "kms_key_arn" {
  description = "KMS key for the bucket (SSE-KMS). null: SSE-S3."
  type        = string
  default     = null
}

variable "follow" {
  description = "Day two: whether the nodes follow the cluster's Kubernetes version (docs/operators.md, \"Following the cluster's version (day two)\"); new instances only (Ignition runs at first boot). Apply the follow_rbac and follow_config outputs to the cluster first. Off by default."
  type        = bool
  default     = false
  nullable    = false
}
