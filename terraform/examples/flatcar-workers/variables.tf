variable "workers" {
  description = "Worker nodes, by name: each gets <ignition_dir>/<name>.ign (the same config)."
  type        = set(string)
  nullable    = false

  validation {
    condition     = length(var.workers) > 0 && alltrue([for n in var.workers : can(regex("^[a-z0-9]([a-z0-9-]*[a-z0-9])?$", n))])
    error_message = "workers must name at least one worker, each a DNS label (lowercase letters, digits, \"-\")."
  }
}

variable "api_server_url" {
  description = "The control plane's API server as the workers reach it, e.g. \"https://api.example.com:6443\"."
  type        = string
  nullable    = false
}

variable "cluster_ca_path" {
  description = "Path of the cluster CA certificate (PEM) the API server's certificate chains to and the kubelets' client certificates are signed by (kubeadm: /etc/kubernetes/pki/ca.crt)."
  type        = string
  nullable    = false

  validation {
    condition     = try(fileexists(var.cluster_ca_path), false)
    error_message = "cluster_ca_path names no file (relative paths are from the directory terraform runs in; kubeadm keeps the CA at /etc/kubernetes/pki/ca.crt on a control-plane node)."
  }
}

variable "kubernetes_version" {
  description = "The control plane's Kubernetes version, e.g. \"v1.31.4\": the seed kubelet.env's tag. The agent asks the API server for the version and takes the kubelet sysext of that version from the mirror; this one is used only with cluster.fallback_to_seed."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^v1\\.[0-9]+\\.[0-9]+([-+][0-9A-Za-z.+-]*)?$", var.kubernetes_version))
    error_message = "kubernetes_version must be a Kubernetes version such as \"v1.31.4\"."
  }
}

variable "bootstrap_token" {
  description = "The bootstrap token the workers start with: id (6 characters of [a-z0-9]), secret (16), expiration (RFC 3339). One from `kubeadm token create` works as it is; a token of your own must be made known to the control plane (the token_manifests output). The workers hold nothing else: each earns its own client certificate."
  type = object({
    id         = string
    secret     = string
    expiration = string
  })
  nullable  = false
  sensitive = true
}

variable "agent_url" {
  description = "URL of the node-bootstrap binary on your mirror (docs/operators.md, \"Hosting the binary\")."
  type        = string
  nullable    = false
}

variable "agent_sha512" {
  description = "SHA-512 of the binary at agent_url: 128 lowercase hex digits, as `sha512sum node-bootstrap` prints them."
  type        = string
  nullable    = false
}

variable "agent_config_path" {
  description = "Path of the agent's config.json (./config.json beside this file is a template: the kubelet as a sysext from your mirror, containerd)."
  type        = string
  default     = "./config.json"
  nullable    = false

  validation {
    condition     = try(fileexists(var.agent_config_path), false)
    error_message = "agent_config_path names no file (relative paths are from the directory terraform runs in; ./config.json here is a template to edit)."
  }
}

variable "runtime_mappings_path" {
  description = "Path of runtime-mappings.yaml (./runtime-mappings.yaml beside this file is a template)."
  type        = string
  default     = "./runtime-mappings.yaml"
  nullable    = false

  validation {
    condition     = try(fileexists(var.runtime_mappings_path), false)
    error_message = "runtime_mappings_path names no file (relative paths are from the directory terraform runs in; ./runtime-mappings.yaml here is a template)."
  }
}

variable "keyring_path" {
  description = "Path of the armored OpenPGP public key that signs your mirror's metadata (`gpg --export --armor KEYID`): the nodes take only signed kubelet images."
  type        = string
  nullable    = false

  validation {
    condition     = try(fileexists(var.keyring_path), false)
    error_message = "keyring_path names no file (relative paths are from the directory terraform runs in); export your mirror's signing key with `gpg --export --armor KEYID > keyring.asc`."
  }
}

variable "ca_bundle_path" {
  description = "Path of PEM CA certificates of a private mirror, trusted by Ignition and the nodes. null: none."
  type        = string
  default     = null

  validation {
    condition     = var.ca_bundle_path == null || try(fileexists(var.ca_bundle_path), false)
    error_message = "ca_bundle_path names no file (relative paths are from the directory terraform runs in), or set null."
  }
}

variable "ssh_user" {
  description = "The user that gets ssh_authorized_keys (\"core\" on Flatcar)."
  type        = string
  default     = "core"
  nullable    = false
}

variable "ssh_authorized_keys" {
  description = "SSH public keys allowed to log in as ssh_user."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "cluster_dns_ip" {
  description = "The cluster DNS Service's address in the service network: 10.96.0.10 in kubeadm's default 10.96.0.0/12 (`kubectl -n kube-system get service kube-dns` says)."
  type        = string
  default     = "10.96.0.10"
  nullable    = false
}

variable "cluster_domain" {
  description = "The cluster's DNS domain."
  type        = string
  default     = "cluster.local"
  nullable    = false
}

variable "node_labels" {
  description = "Labels the workers' kubelets register with, besides node.kubernetes.io/role=worker."
  type        = map(string)
  default     = {}
  nullable    = false
}

variable "worker_taints" {
  description = "Taints of the workers' Nodes (\"key=value:Effect\"). null: none."
  type        = list(string)
  default     = null
}

variable "kubelet_extra_args" {
  description = "More kubelet flags, one per element (e.g. \"--max-pods=50\")."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "ignition_dir" {
  description = "Directory the workers' configs are written to, one <worker>.ign each (mode 0600). null: write none (the ignition_configs output has them)."
  type        = string
  default     = "./rendered"
}

variable "follow" {
  description = "Day two: whether the workers follow the control plane's Kubernetes version (docs/operators.md, \"Following the cluster's version (day two)\"): patch releases of their minor on their own, a minor once you name it in the follow ConfigMap; one worker at a time, a worker that does not come back Ready rolled back and the rollout halted there. Apply the follow_rbac and follow_config outputs to the cluster first. Off by default."
  type        = bool
  default     = false
  nullable    = false
}
