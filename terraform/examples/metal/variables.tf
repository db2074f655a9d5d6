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

  validation {
    condition     = length(setintersection(var.workers, var.masters)) == 0 && !contains(setunion(var.workers, var.masters), var.bootkube_master.name)
    error_message = "every node needs a name of its own: bootkube_master.name, masters and workers overlap."
  }
}

variable "assets_dir" {
  description = "Local directory with the cluster assets (bootkube.sh, tectonic-wrapper.sh, manifests, TLS; docs/operators.md, \"The control plane\"), pushed to /opt/tectonic on the bootkube master when push_assets is true."
  type        = string
  nullable    = false
}

variable "push_assets" {
  description = "Push the assets to the bootkube master (it must be booting from its config: the push waits up to ssh_timeout for its SSH). false: render and write the configs only. Render first, serve the configs, then apply with true."
  type        = bool
  default     = false
  nullable    = false
}

variable "ignition_dir" {
  description = "Directory the nodes' configs are written to, one <node>.ign each (mode 0600), for your PXE / matchbox setup to serve. null: write none (the ignition_configs output has them)."
  type        = string
  default     = "./rendered"
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

  validation {
    condition     = var.ssh_private_key_path == null || try(fileexists(pathexpand(var.ssh_private_key_path)), false)
    error_message = "ssh_private_key_path names no file (relative paths are from the directory terraform runs in); null uses the SSH agent."
  }
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
  description = "SHA-512 of the binary at agent_url: 128 lowercase hex digits, as `sha512sum node-bootstrap` prints them."
  type        = string
  nullable    = false
}

variable "agent_config_path" {
  description = "Path of the agent's config.json, shared by all nodes (role and assets.mode are set per node); ./config.json beside this file is a template. null: defaults only."
  type        = string
  default     = null

  validation {
    condition     = var.agent_config_path == null || try(fileexists(var.agent_config_path), false)
    error_message = "agent_config_path names no file (relative paths are from the directory terraform runs in; ./config.json here is a template to edit)."
  }
}

variable "kubelet_image_url" {
  description = "Kubelet image repository (seed kubelet.env's KUBELET_IMAGE_URL): read only by kubelet-wrapper, on releases before Flatcar 2857.0.0 (the Tectonic template); a node whose kubelet is the system extension (every release that reads these configs) ignores it."
  type        = string
  default     = "quay.io/coreos/hyperkube"
  nullable    = false
}

variable "kubelet_image_tag" {
  description = "Seed kubelet.env's KUBELET_IMAGE_TAG: the cluster's Kubernetes version as an image tag (\"+\" written as \"_\"), e.g. \"v1.31.4\" (\"v1.9.6_coreos.0\" in the Tectonic template). The bootkube master takes the cluster's version from it (its API server does not exist yet); the other nodes ask the API server and use it only with cluster.fallback_to_seed."
  type        = string
  nullable    = false
}

variable "runtime_mappings_path" {
  description = "Path of runtime-mappings.yaml (Kubernetes minor => docker versions, containerd series); ./runtime-mappings.yaml beside this file is a template."
  type        = string
  nullable    = false

  validation {
    condition     = try(fileexists(var.runtime_mappings_path), false)
    error_message = "runtime_mappings_path names no file (relative paths are from the directory terraform runs in; ./runtime-mappings.yaml here is a template)."
  }
}

variable "keyring_path" {
  description = "Path of the armored OpenPGP public keyring that signs your mirror's torcx manifests and metadata (yours: export it with `gpg --export --armor KEYID`). null: none (then the agent config must allow unsigned sources)."
  type        = string
  default     = null

  validation {
    condition     = var.keyring_path == null || try(fileexists(var.keyring_path), false)
    error_message = "keyring_path names no file (relative paths are from the directory terraform runs in); export your mirror's signing key with `gpg --export --armor KEYID > keyring.asc`, or set null."
  }
}

variable "kubeconfig_path" {
  description = "Path of the nodes' kubeconfig with long-lived credentials, written to /etc/kubernetes/kubeconfig (mode 0600) on every node, or only on the masters with bootstrap_token. The assets carry it as <assets_dir>/auth/kubeconfig (docs/operators.md, \"The control plane\"). Its first cluster must carry certificate-authority-data (the CA inline)."
  type        = string
  nullable    = false

  validation {
    condition     = try(fileexists(var.kubeconfig_path), false)
    error_message = "kubeconfig_path names no file (relative paths are from the directory terraform runs in; the assets carry it as <assets_dir>/auth/kubeconfig)."
  }
  validation {
    condition     = !try(fileexists(var.kubeconfig_path), false) || can(yamldecode(file(var.kubeconfig_path)).clusters[0].cluster["certificate-authority-data"])
    error_message = "kubeconfig_path: its first cluster has no certificate-authority-data; put the CA inline (a certificate-authority: path is not read: the file would not exist on the nodes)."
  }
}

variable "bootstrap_token" {
  description = "A bootstrap token the workers start with instead of the kubeconfig at kubeconfig_path (recommended: a worker then holds no long-lived credential; docs/operators.md, \"Node credentials\"): id (6 characters of [a-z0-9]), secret (16), expiration (RFC 3339). The server and CA of the workers' bootstrap kubeconfig are those of kubeconfig_path's first cluster. The token's Secret and the RBAC are pushed with the assets (manifests/bootstrap-token-<id>.yaml, manifests/node-bootstrap-rbac.yaml), which tectonic applies. null: every node gets kubeconfig_path."
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

  validation {
    condition     = var.ca_bundle_path == null || try(fileexists(var.ca_bundle_path), false)
    error_message = "ca_bundle_path names no file (relative paths are from the directory terraform runs in), or set null."
  }
}

# The kubelet's settings, as the ignition module takes them
# (docs/operators.md, "The kubelet a node runs"). Check cluster_dns_ip
# against your service network: every pod's DNS depends on it.

variable "cluster_dns_ip" {
  description = "The cluster DNS service address in the service network (the kube-dns/CoreDNS Service's clusterIP): 10.3.0.10 in Tectonic's 10.3.0.0/16, 10.96.0.10 in kubeadm's default 10.96.0.0/12."
  type        = string
  default     = "10.3.0.10"
  nullable    = false
}

variable "cluster_domain" {
  description = "The cluster's DNS domain."
  type        = string
  default     = "cluster.local"
  nullable    = false
}

variable "node_labels" {
  description = "Labels every node's kubelet registers with, besides node.kubernetes.io/role (set from the role)."
  type        = map(string)
  default     = {}
  nullable    = false
}

variable "master_taints" {
  description = "Taints of the masters' Nodes (\"key=value:Effect\"). null: node-role.kubernetes.io/master=:NoSchedule."
  type        = list(string)
  default     = null
}

variable "worker_taints" {
  description = "Taints of the workers' Nodes (\"key=value:Effect\"). null: none."
  type        = list(string)
  default     = null
}

variable "kubelet_extra_args" {
  description = "More kubelet flags for every node, one per element (e.g. \"--max-pods=50\")."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "follow" {
  description = "Day two: whether the nodes follow the cluster's Kubernetes version (docs/operators.md, \"Following the cluster's version (day two)\"): patch releases of their minor on their own, a minor once you name it in the follow ConfigMap; one node at a time, a node that does not come back Ready rolled back and the rollout halted there. New nodes only: Ignition runs at first boot. Apply the follow_rbac and follow_config outputs to the cluster first. Off by default."
  type        = bool
  default     = false
  nullable    = false
}
