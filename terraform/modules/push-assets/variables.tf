variable "host" {
  description = "Address of the node to push the assets to (normally the bootkube master)."
  type        = string
  nullable    = false

  validation {
    condition     = length(trimspace(var.host)) > 0
    error_message = "host must not be empty."
  }
}

variable "port" {
  description = "SSH port of the node."
  type        = number
  default     = 22
  nullable    = false

  validation {
    condition     = var.port >= 1 && var.port <= 65535 && floor(var.port) == var.port
    error_message = "port must be an integer between 1 and 65535."
  }
}

variable "user" {
  description = "SSH user (\"core\" on Flatcar / Container Linux). A user other than root needs passwordless sudo, as core has."
  type        = string
  default     = "core"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,31}$", var.user))
    error_message = "user must be a valid user name (lowercase letters, digits, \"_\", \"-\")."
  }
}

variable "private_key" {
  description = "SSH private key (the key itself, e.g. file(\"~/.ssh/id_ed25519\")). null: use the SSH agent (SSH_AUTH_SOCK)."
  type        = string
  default     = null
  sensitive   = true
}

variable "host_key" {
  description = "The node's SSH host public key (\"ssh-ed25519 AAAA...\") or the CA that signs it. Set it: without it terraform accepts any host key."
  type        = string
  default     = null

  validation {
    condition     = var.host_key == null || can(regex("^(ssh-(ed25519|rsa)|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/=]+", trimspace(var.host_key)))
    error_message = "host_key must be an OpenSSH public key line (\"ssh-ed25519 AAAA...\"), or null."
  }
}

variable "ssh_timeout" {
  description = "How long to keep trying to reach the node over SSH (it may still be booting), as a duration (\"5m\", \"90s\")."
  type        = string
  default     = "10m"
  nullable    = false

  validation {
    condition     = can(regex("^[0-9]+(s|m|h)$", var.ssh_timeout))
    error_message = "ssh_timeout must be a duration like \"90s\", \"10m\" or \"1h\"."
  }
}

variable "assets_dir" {
  description = "Local directory with the cluster assets (bootkube.sh, tectonic-wrapper.sh, manifests, TLS). Its contents become target_dir on the node."
  type        = string
  nullable    = false

  validation {
    condition     = length(fileset(var.assets_dir, "**")) > 0
    error_message = "assets_dir must be a directory that contains files."
  }
}

variable "extra_files" {
  description = "Files pushed with the assets that are not in assets_dir: path relative to target_dir => contents, e.g. the bootstrap-token module's manifests under manifests/ ({ for k, v in module.bootstrap_token.manifests : \"manifests/$${k}\" => v }), which tectonic applies with the others. Checked against the manifest like every asset; a path that assets_dir already has is refused. Sensitive (a token Secret is a secret)."
  type        = map(string)
  default     = {}
  nullable    = false
  sensitive   = true

  validation {
    condition     = alltrue([for f in nonsensitive(keys(var.extra_files)) : can(regex("^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$", f)) && !can(regex("(^|/)\\.\\.?(/|$)", f))])
    error_message = "every extra_files path must be relative to target_dir, made of letters, digits, \".\", \"_\", \"-\" and \"/\", without . or .. components (e.g. \"manifests/bootstrap-token-abcdef.yaml\")."
  }
  validation {
    condition     = length(setintersection(toset(nonsensitive(keys(var.extra_files))), fileset(var.assets_dir, "**"))) == 0
    error_message = "extra_files names a path that assets_dir already has: ${join(", ", setintersection(toset(nonsensitive(keys(var.extra_files))), fileset(var.assets_dir, "**")))}."
  }
}

variable "required_files" {
  description = "Files (relative to assets_dir) that must exist before anything is pushed: a bootkube master waits for bootkube.sh and tectonic-wrapper.sh, and would wait forever without them."
  type        = list(string)
  default     = ["bootkube.sh", "tectonic-wrapper.sh"]
  nullable    = false

  validation {
    condition     = alltrue([for f in var.required_files : fileexists("${var.assets_dir}/${f}")])
    error_message = "assets_dir lacks required files: ${join(", ", [for f in var.required_files : f if !fileexists("${var.assets_dir}/${f}")])}."
  }
}

variable "target_dir" {
  description = "Where the assets go on the node. The units wait for /opt/tectonic/bootkube.sh and /opt/tectonic/tectonic-wrapper.sh; change it only together with the units and the agent's paths.assets_dir."
  type        = string
  default     = "/opt/tectonic"
  nullable    = false

  validation {
    condition     = can(regex("^(/[A-Za-z0-9._-]+){2,}$", var.target_dir)) && !can(regex("/\\.\\.?(/|$)", var.target_dir))
    error_message = "target_dir must be an absolute path at least two levels deep (e.g. /opt/tectonic), without . or .. components."
  }
}

variable "staging_dir" {
  description = "Where the assets are uploaded before they are moved into place, as an absolute path on the node writable by user. null: .node-bootstrap-push in the user's home (/home/<user>, or /root)."
  type        = string
  default     = null

  validation {
    condition     = var.staging_dir == null || can(regex("^(/[A-Za-z0-9._-]+){2,}$", coalesce(var.staging_dir, "/x/y")))
    error_message = "staging_dir must be an absolute path at least two levels deep, or null."
  }
}

variable "complete_marker" {
  description = "A file name written into target_dir after every asset and before the rename, for agents configured to wait for a marker. null: none (the directory appearing is the signal)."
  type        = string
  default     = null

  validation {
    condition     = var.complete_marker == null || can(regex("^[A-Za-z0-9._-]+$", coalesce(var.complete_marker, "x"))) && !contains([".", ".."], coalesce(var.complete_marker, "x"))
    error_message = "complete_marker must be a plain file name, or null."
  }
}
