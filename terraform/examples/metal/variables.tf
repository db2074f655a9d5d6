variable "bootkube_master" {
  description = "The first master: it runs bootkube and tectonic, and gets the assets pushed over SSH. host is the address terraform connects to; host_key its SSH host public key (strongly recommended)."
  type = object({
    name     = string
    host     = string
    port     = optional(number, 22)
    host_key = optional(string)
  })
  nullable = false

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]*[a-z0-9])?$", var.bootkube_master.name))
    error_message = "bootkube_master.name must be a DNS label (lowercase letters, digits, \"-\")."
  }
}

variable "masters" {
  description = "Further control-plane nodes that join the cluster, by name (they get an Ignition config; no assets)."
  type        = set(string)
  default     = []
  nullable    = false
}

variable "workers" {
  description = "Worker nodes, by name (they get an Ignition config; no assets)."
  type        = set(string)
  default     = []
  nullable    = false
}

variable "assets_dir" {
  description = "Local directory with the cluster assets (bootkube.sh, tectonic-wrapper.sh, manifests, TLS), pushed to /opt/tectonic on the bootkube master."
  type        = string
  nullable    = false
}

variable "ssh_user" {
  description = "SSH user on the nodes (\"core\" on Flatcar); it gets ssh_authorized_keys and must have passwordless sudo unless it is root."
  type        = string
  default     = "core"
  nullable    = false
}

variable "ssh_private_key_path" {
  description = "Path of the SSH private key terraform pushes with. null: use the SSH agent."
  type        = string
  default     = null
}

variable "ssh_authorized_keys" {
  description = "SSH public keys written for ssh_user on every node (include the one matching ssh_private_key_path)."
  type        = list(string)
  nullable    = false
}

variable "ssh_timeout" {
  description = "How long the push keeps trying to reach the bootkube master over SSH while it installs and boots."
  type        = string
  default     = "30m"
  nullable    = false
}

variable "agent_url" {
  description = "URL of the node-bootstrap binary (your mirror; see docs/operators.md)."
  type        = string
  nullable    = false
}

variable "agent_sha512" {
  description = "SHA-512 (hex) of the binary at agent_url."
  type        = string
  nullable    = false
}

variable "agent_config_path" {
  description = "Path of the agent's config.json, shared by all nodes (role and assets.mode are set per node). null: defaults only."
  type        = string
  default     = null
}

variable "kubelet_image_url" {
  description = "Kubelet image repository (seed kubelet.env)."
  type        = string
  default     = "quay.io/coreos/hyperkube"
  nullable    = false
}

variable "kubelet_image_tag" {
  description = "Kubelet image tag (seed kubelet.env), e.g. \"v1.9.6_coreos.0\"."
  type        = string
  nullable    = false
}

variable "runtime_mappings_path" {
  description = "Path of runtime-mappings.yaml (Kubernetes minor => docker versions)."
  type        = string
  nullable    = false
}

variable "keyring_path" {
  description = "Path of the armored OpenPGP public keyring that signs torcx manifests and metadata. null: none."
  type        = string
  default     = null
}

variable "kubeconfig_path" {
  description = "Path of the nodes' kubeconfig with long-lived credentials, written to /etc/kubernetes/kubeconfig (mode 0600) on every node, or only on the masters with bootstrap_token."
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

variable "ca_bundle_path" {
  description = "Path of PEM CA certificates of a private mirror, trusted by Ignition and the nodes. null: none."
  type        = string
  default     = null
}
