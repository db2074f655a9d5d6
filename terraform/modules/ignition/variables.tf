variable "role" {
  description = "The node's role: \"worker\", \"master\" (a control-plane node joining an existing cluster) or \"bootkube-master\" (the first master, which runs bootkube and tectonic once its assets arrive)."
  type        = string
  nullable    = false

  validation {
    condition     = contains(["worker", "master", "bootkube-master"], var.role)
    error_message = "role must be \"worker\", \"master\" or \"bootkube-master\"."
  }
}

variable "assets_mode" {
  description = "How the cluster assets reach the node: \"push\" (terraform copies them over SSH, see the push-assets module) or \"pull\" (the agent downloads the bundle from S3; installs and enables init-assets.service)."
  type        = string
  default     = "push"
  nullable    = false

  validation {
    condition     = contains(["push", "pull"], var.assets_mode)
    error_message = "assets_mode must be \"push\" or \"pull\"."
  }
}

variable "agent_url" {
  description = "Where Ignition downloads the node-bootstrap binary from (https://, http://, s3:// or gs://; a private mirror works). It is installed at /opt/bin/node-bootstrap with mode 0755 only if its SHA-512 matches agent_sha512."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^(https?|s3|gs)://[^[:space:]]+$", var.agent_url))
    error_message = "agent_url must be an https://, http://, s3:// or gs:// URL without spaces."
  }
}

variable "agent_sha512" {
  description = "SHA-512 of the node-bootstrap binary at agent_url, as 128 lowercase hex digits (sha512sum prints it). Ignition refuses a binary that does not match."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^[0-9a-f]{128}$", var.agent_sha512))
    error_message = "agent_sha512 must be 128 lowercase hex digits (the output of sha512sum, without the file name)."
  }
}

variable "agent_http_headers" {
  description = "HTTP headers Ignition sends when downloading the binary (e.g. an Authorization header for a private mirror). Only used with http(s) URLs."
  type        = map(string)
  default     = {}
  nullable    = false
  sensitive   = true
}

variable "agent_config" {
  description = "The agent's configuration, a JSON object (e.g. file(\"config.json\") or jsonencode({...})), written to /etc/node-bootstrap/config.json. This module does not re-model it; it only sets \"role\" and \"assets.mode\" from role and assets_mode, and \"cluster.credential\" to \"bootstrap-token\" when bootstrap_kubeconfig is given (if the object already has them they must agree), and \"cluster.join_watch_secs\" to 1800 unless the object sets it, and refuses at plan time what the agent would refuse on the node: pull mode without assets.s3 (bucket and key), an assets.s3 without them, a helper in docker mode without docker.image."
  type        = string
  default     = "{}"
  nullable    = false

  validation {
    condition     = can(keys(jsondecode(var.agent_config)))
    error_message = "agent_config must be a JSON object (e.g. \"{}\" or jsonencode({ cluster = { ... } }))."
  }
  validation {
    condition     = !can(keys(jsondecode(var.agent_config))) || try(jsondecode(var.agent_config).role, var.role) == var.role
    error_message = "agent_config.role disagrees with the role variable; remove \"role\" from agent_config (the module sets it) or make them equal."
  }
  validation {
    condition     = !can(keys(jsondecode(var.agent_config))) || can(keys(try(jsondecode(var.agent_config).assets, {})))
    error_message = "agent_config.assets must be an object."
  }
  validation {
    condition     = !can(keys(jsondecode(var.agent_config))) || try(jsondecode(var.agent_config).assets.mode, var.assets_mode) == var.assets_mode
    error_message = "agent_config.assets.mode disagrees with the assets_mode variable; remove it from agent_config (the module sets it) or make them equal."
  }
  # What the agent refuses when it loads the config (exit 4 on the node,
  # src/assets/config.rs and src/helper/config.rs), refused here at plan time.
  validation {
    condition     = !can(keys(jsondecode(var.agent_config))) || var.assets_mode != "pull" || try(jsondecode(var.agent_config).assets.s3, null) != null
    error_message = "assets_mode is \"pull\" but agent_config has no assets.s3: the agent pulls the bundle from S3 and needs its bucket and key (agent_config.assets.s3 = { bucket = \"...\", key = \"...\" }, see docs/operators.md, \"Pull mode\")."
  }
  validation {
    condition = try(jsondecode(var.agent_config).assets.s3, null) == null || (
      can(regex("^[^/]*[^/[:space:]][^/]*$", jsondecode(var.agent_config).assets.s3.bucket)) &&
      can(regex("[^[:space:]]", jsondecode(var.agent_config).assets.s3.key))
    )
    error_message = "agent_config.assets.s3 needs \"bucket\" (a bucket name without \"/\") and \"key\" (the bundle's object key), both non-empty strings."
  }
  validation {
    condition = alltrue([
      for h in ["bootkube", "tectonic"] :
      contains(["script", "docker"], try(coalesce(jsondecode(var.agent_config).helpers[h].mode, "script"), "script"))
    ])
    error_message = "agent_config.helpers.<bootkube|tectonic>.mode must be \"script\" or \"docker\"."
  }
  validation {
    condition = (
      try(coalesce(jsondecode(var.agent_config).helpers.bootkube.mode, "script"), "script") != "docker" &&
      try(jsondecode(var.agent_config).helpers.bootkube.docker, null) == null
    ) || can(regex("^[^[:space:]]+$", jsondecode(var.agent_config).helpers.bootkube.docker.image))
    error_message = "agent_config.helpers.bootkube.docker.image is required in docker mode (and whenever helpers.bootkube.docker is set): an image reference without spaces."
  }
  validation {
    condition = (
      try(coalesce(jsondecode(var.agent_config).helpers.tectonic.mode, "script"), "script") != "docker" &&
      try(jsondecode(var.agent_config).helpers.tectonic.docker, null) == null
    ) || can(regex("^[^[:space:]]+$", jsondecode(var.agent_config).helpers.tectonic.docker.image))
    error_message = "agent_config.helpers.tectonic.docker.image is required in docker mode (and whenever helpers.tectonic.docker is set): an image reference without spaces."
  }
  validation {
    condition     = !can(keys(jsondecode(var.agent_config))) || try(jsondecode(var.agent_config).cluster.credential, "") == "" || try(jsondecode(var.agent_config).cluster.credential, "") == (nonsensitive(var.bootstrap_kubeconfig != null) ? "bootstrap-token" : "kubeconfig")
    error_message = "agent_config.cluster.credential disagrees with the kubeconfig given: it must be \"bootstrap-token\" with bootstrap_kubeconfig and \"kubeconfig\" with kubeconfig; remove it from agent_config (the module sets it) or make them agree."
  }
  validation {
    condition     = !can(keys(jsondecode(var.agent_config))) || length(setintersection(keys(try(jsondecode(var.agent_config).kubelet_config, {})), ["cluster_dns", "cluster_domain", "taints"])) == 0
    error_message = "agent_config.kubelet_config must not set cluster_dns, cluster_domain or taints: the module sets them from the cluster_dns_ip, cluster_domain and node_taints variables."
  }
  validation {
    condition     = !can(keys(jsondecode(var.agent_config))) || try(jsondecode(var.agent_config).follow.enabled, var.follow) == var.follow
    error_message = "agent_config.follow.enabled disagrees with the follow variable; remove it from agent_config (the module sets it, and enables the follow timer with it) or make them equal."
  }
  validation {
    condition     = !can(keys(jsondecode(var.agent_config))) || try(jsondecode(var.agent_config).paths.bootstrap_kubeconfig, "/etc/kubernetes/bootstrap-kubeconfig") == "/etc/kubernetes/bootstrap-kubeconfig"
    error_message = "agent_config.paths.bootstrap_kubeconfig must be /etc/kubernetes/bootstrap-kubeconfig (or absent): the module writes the bootstrap kubeconfig there and kubelet.service's --bootstrap-kubeconfig names it."
  }
}

variable "kubelet_image_url" {
  description = "KUBELET_IMAGE_URL of the seed /etc/kubernetes/installer/kubelet.env: the kubelet image repository kubelet-wrapper runs (Container Linux), without a tag; unused with kubelet.backend \"sysext\"."
  type        = string
  default     = "quay.io/coreos/hyperkube"
  nullable    = false

  validation {
    condition     = can(regex("^[A-Za-z0-9][A-Za-z0-9._:/-]*[A-Za-z0-9]$", var.kubelet_image_url)) && !can(regex(":[^/]*$", var.kubelet_image_url))
    error_message = "kubelet_image_url must be an image repository such as \"quay.io/coreos/hyperkube\", without a tag (the tag goes in kubelet_image_tag)."
  }
}

variable "kubelet_image_tag" {
  description = "KUBELET_IMAGE_TAG of the seed kubelet.env: the cluster's Kubernetes version as an image tag (\"+\" written as \"_\"), e.g. \"v1.31.4\" or \"v1.9.6_coreos.0\". On the bootkube master it is the cluster's version (no API server exists yet); every other node asks the API server and uses it only with cluster.fallback_to_seed. Required with kubelet.backend \"sysext\" too (the agent reads the seed), where no image is pulled."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", var.kubelet_image_tag))
    error_message = "kubelet_image_tag must be a valid image tag (letters, digits, \"_\", \".\", \"-\"; at most 128 characters; write \"+\" as \"_\", e.g. \"v1.9.6_coreos.0\")."
  }
}

variable "runtime_mappings" {
  description = "Contents of /etc/kubernetes/installer/runtime-mappings.yaml: which docker versions fit each Kubernetes minor, in preference order (kind: VersionManifestV1)."
  type        = string
  nullable    = false

  validation {
    condition     = try(yamldecode(var.runtime_mappings).kind, "") == "VersionManifestV1" && can(keys(yamldecode(var.runtime_mappings).versions.k8s))
    error_message = "runtime_mappings must be YAML with \"kind: VersionManifestV1\" and a \"versions.k8s\" map (see docs/formats.md section 4)."
  }
  # The agent's rule for a containerd list (src/container_runtime/version.rs,
  # `serves`), so that `terraform plan` refuses what every node would:
  # entries "MAJOR.MINOR"; containerd 1.5 or newer (older ones cannot
  # report the cgroup driver); from Kubernetes 1.26 (CRI v1 only) 1.6 or
  # newer; up to 1.22 (CRI v1alpha2 only) older than 2.0; none before 1.10
  # (CRI v1alpha1).
  validation {
    condition = alltrue(flatten([
      for k, e in try(yamldecode(var.runtime_mappings).versions.k8s, {}) : [
        for c in try(e.containerd, []) : can(regex("^[0-9]+\\.[0-9]+$", k)) && can(regex("^[0-9]+\\.[0-9]+$", c)) && try(
          (tonumber(split(".", c)[0]) * 1000 + tonumber(split(".", c)[1]) >= 1005)
          && (tonumber(split(".", k)[1]) < 26 || tonumber(split(".", c)[0]) * 1000 + tonumber(split(".", c)[1]) >= 1006)
          && (tonumber(split(".", k)[1]) > 22 || tonumber(split(".", c)[0]) < 2)
          && tonumber(split(".", k)[1]) >= 10,
        false)
      ]
    ]))
    error_message = "runtime_mappings: a containerd series no node would accept: ${join("; ", flatten([for k, e in try(yamldecode(var.runtime_mappings).versions.k8s, {}) : [for c in try(e.containerd, []) : "\"${k}\" lists containerd ${c}" if !try((tonumber(split(".", c)[0]) * 1000 + tonumber(split(".", c)[1]) >= 1005) && (tonumber(split(".", k)[1]) < 26 || tonumber(split(".", c)[0]) * 1000 + tonumber(split(".", c)[1]) >= 1006) && (tonumber(split(".", k)[1]) > 22 || tonumber(split(".", c)[0]) < 2) && tonumber(split(".", k)[1]) >= 10, false)]]))}. Each entry is a containerd MAJOR.MINOR; the agent needs 1.5 or newer (the runtime options it reads back), 1.6 or newer for Kubernetes 1.26 on (CRI v1 only), older than 2.0 up to 1.22 (CRI v1alpha2 only), and none before 1.10 (docs/operators.md, \"Choosing the runtime\"; `node-bootstrap check-config --mappings FILE` says the same)."
  }
}

variable "keyring" {
  description = "ASCII-armored OpenPGP public keys that sign torcx manifests and artifact metadata, written to /etc/kubernetes/installer/keyring.asc. null: no keyring is written (only unsigned sources the agent config allows can be used). Sensitive, though a public key is not: it is checked by a precondition on the rendered output (a variable validation error would print it), so a secret key given here by mistake is refused without being shown."
  type        = string
  default     = null
  sensitive   = true
}

variable "kubeconfig" {
  description = "The node's kubeconfig with long-lived client credentials (API server URL, CA, a client certificate and key or a static token), written to /etc/kubernetes/kubeconfig with mode 0600; the agent and the kubelet use it as it is. Give exactly one of kubeconfig and bootstrap_kubeconfig. Secret: the rendered config is a sensitive output."
  type        = string
  default     = null
  sensitive   = true
  # Checked by a precondition on the rendered output (outputs.tf): a variable
  # validation error would print the value.
}

variable "bootstrap_kubeconfig" {
  description = "A bootstrap kubeconfig (API server URL, CA, and a bootstrap token \"<id>.<secret>\" as the only credential), e.g. the bootstrap-token module's kubeconfig output, written to /etc/kubernetes/bootstrap-kubeconfig with mode 0600. The node then holds no client certificate, key or static token: the agent reads /version with the token (agent_config gets cluster.credential = \"bootstrap-token\") and the kubelet earns its own client certificate with it. Give exactly one of kubeconfig and bootstrap_kubeconfig. Sensitive."
  type        = string
  default     = null
  sensitive   = true
  # Checked by preconditions on the rendered output (outputs.tf), never printed.
}

variable "ssh_user" {
  description = "The user that gets ssh_authorized_keys (\"core\" on Flatcar / Container Linux)."
  type        = string
  default     = "core"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,31}$", var.ssh_user))
    error_message = "ssh_user must be a valid user name (lowercase letters, digits, \"_\", \"-\")."
  }
}

variable "ssh_authorized_keys" {
  description = "SSH public keys allowed to log in as ssh_user (push mode connects with one of them). Empty: no passwd section."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for k in var.ssh_authorized_keys : can(regex("^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\\.com) [A-Za-z0-9+/=]+( .*)?$", trimspace(k)))])
    error_message = "every ssh_authorized_keys entry must be one OpenSSH public key line (\"ssh-ed25519 AAAA... comment\")."
  }
}

variable "ca_bundle" {
  description = "PEM certificates of a private CA (e.g. of a private mirror): Ignition trusts them when fetching agent_url, and the node trusts them too (/etc/ssl/certs/node-bootstrap-ca.pem, picked up by update-ca-certificates.service before the agent runs). null: none."
  type        = string
  default     = null

  validation {
    condition     = var.ca_bundle == null || can(regex("^\\s*-----BEGIN CERTIFICATE-----", var.ca_bundle))
    error_message = "ca_bundle must be PEM certificates (starting with -----BEGIN CERTIFICATE-----), or null."
  }
}

variable "units_dir" {
  description = "Directory holding the unit files to embed. null (the default): the repository's units/ directory, the one source of truth. Set it only if you vendor this module without the rest of the repository."
  type        = string
  default     = null
}

variable "cluster_dns_ip" {
  description = "The cluster DNS service address the kubelet gives pods (--cluster-dns): the kube-dns/CoreDNS service IP in the service network."
  type        = string
  default     = "10.3.0.10"
  nullable    = false

  validation {
    condition     = can(cidrhost("${var.cluster_dns_ip}/32", 0)) || can(cidrhost("${var.cluster_dns_ip}/128", 0))
    error_message = "cluster_dns_ip must be one IPv4 or IPv6 address, such as \"10.3.0.10\"."
  }
}

variable "cluster_domain" {
  description = "The cluster's DNS domain the kubelet gives pods (--cluster-domain)."
  type        = string
  default     = "cluster.local"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$", var.cluster_domain))
    error_message = "cluster_domain must be a DNS domain in lowercase, such as \"cluster.local\"."
  }
}

variable "node_labels" {
  description = "Labels the kubelet registers its Node with, besides node.kubernetes.io/role=<worker|master>, which the module sets from role. Kubelets may only set their own labels outside the kubernetes.io and k8s.io namespaces, or under node.kubernetes.io/ and kubelet.kubernetes.io/ (and a few well-known ones): kubelet 1.16 and later refuse to start with others (node-role.kubernetes.io/master among them: an administrator sets that one through the API)."
  type        = map(string)
  default     = {}
  nullable    = false

  validation {
    condition = alltrue([
      for k, v in var.node_labels :
      can(regex("^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$", k)) && can(regex("^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$", v))
    ])
    error_message = "node_labels must be Kubernetes labels: keys like \"example.com/rack\" or \"rack\", values of at most 63 letters, digits, \"-\", \"_\", \".\"."
  }
  validation {
    condition = alltrue([
      for k, v in var.node_labels :
      !can(regex("^([^/]*\\.)?(kubernetes\\.io|k8s\\.io)/", k)) || can(regex("^([^/]*\\.)?(node|kubelet)\\.kubernetes\\.io/", k)) || contains(["kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch", "node.kubernetes.io/instance-type", "topology.kubernetes.io/zone", "topology.kubernetes.io/region"], k)
    ])
    error_message = "node_labels has a key in the kubernetes.io or k8s.io namespace that a kubelet may not set on its own Node (kubelet 1.16+ refuses to start); use node.kubernetes.io/... or your own domain, and set others (e.g. node-role.kubernetes.io/...) through the API."
  }
  validation {
    condition     = !contains(keys(var.node_labels), "node.kubernetes.io/role")
    error_message = "node_labels must not set node.kubernetes.io/role: the module sets it from role."
  }
}

variable "node_taints" {
  description = "Taints the kubelet registers its Node with (--register-with-taints), each \"key=value:Effect\" or \"key:Effect\". null (the default): the role's, i.e. none on a worker and \"node-role.kubernetes.io/master=:NoSchedule\" on a master (only pods that tolerate it run there)."
  type        = list(string)
  default     = null

  validation {
    condition     = var.node_taints == null || alltrue([for t in coalesce(var.node_taints, []) : can(regex("^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?(=[A-Za-z0-9_.-]{0,63})?:(NoSchedule|PreferNoSchedule|NoExecute)$", t))])
    error_message = "each node_taints entry must be \"key=value:Effect\" or \"key:Effect\" with Effect NoSchedule, PreferNoSchedule or NoExecute."
  }
}

variable "kubelet_extra_args" {
  description = "More kubelet flags, one per element (e.g. \"--max-pods=50\"), appended after the unit's: a flag given twice takes the last value."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for a in var.kubelet_extra_args : can(regex("^--[a-z0-9-]+(=[^[:space:]\"'\\\\$%`]*)?$", a))])
    error_message = "each kubelet_extra_args entry must be one flag \"--name\" or \"--name=value\", with no whitespace, quotes, backslashes, \"$\", \"%\" or backticks in the value."
  }
}

variable "kubelet_client_ca" {
  description = "PEM CA certificate(s) the kubelet trusts for client certificates (--client-ca-file, written to /etc/kubernetes/ca.crt): the CA that signs the API server's kubelet client certificate. null (the default): the certificate-authority-data of the first cluster of kubeconfig or bootstrap_kubeconfig."
  type        = string
  default     = null

  validation {
    condition     = var.kubelet_client_ca == null || can(regex("^\\s*-----BEGIN CERTIFICATE-----", var.kubelet_client_ca))
    error_message = "kubelet_client_ca must be PEM certificates (starting with -----BEGIN CERTIFICATE-----), or null."
  }
}

variable "follow" {
  description = "Day two: whether this node follows its cluster's Kubernetes version (docs/operators.md, \"Following the cluster's version\"): true installs node-bootstrap-follow.service, enables its timer and node-bootstrap-follow-converge.service, and sets agent_config.follow.enabled. Off by default: turn it on per role (the module instance of that role), once the cluster has what the follow-rbac module renders (its RBAC and the follow lease, a ConfigMap)."
  type        = bool
  default     = false
  nullable    = false
}
