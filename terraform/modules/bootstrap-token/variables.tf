variable "token_id" {
  description = "The bootstrap token's public half: 6 characters of [a-z0-9] (e.g. from `tr -dc a-z0-9 </dev/urandom | head -c 6`). It names the Secret (kube-system/bootstrap-token-<id>) and the user the API server sees (system:bootstrap:<id>), so a valid id is not secret. Sensitive all the same, and checked by a precondition on the outputs (a variable validation error would print it): a whole token pasted here by mistake is refused without being shown. Once it is 6 such characters it is used as a public value."
  type        = string
  nullable    = false
  sensitive   = true
}

variable "token_secret" {
  description = "The bootstrap token's secret half: 16 characters of [a-z0-9] from a random source (e.g. `tr -dc a-z0-9 </dev/urandom | head -c 16`). Sensitive: checked by a precondition on the outputs (a variable validation error would print it)."
  type        = string
  nullable    = false
  sensitive   = true
}

variable "expiration" {
  description = "When the API server stops accepting the token (and the controller manager's tokencleaner deletes its Secret), as an RFC 3339 timestamp such as \"2026-12-01T00:00:00Z\". It must be in the future when terraform plans. Nodes need the token only until they hold their first client certificate: keep it short (hours to days) and make a new token for nodes added later."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$", var.expiration)) && can(timecmp(var.expiration, "2000-01-01T00:00:00Z"))
    error_message = "expiration must be an RFC 3339 timestamp such as \"2026-12-01T00:00:00Z\" (uppercase T, and Z or an offset like +01:00)."
  }
  validation {
    # try(): terraform evaluates both sides of ||, and a malformed
    # timestamp is the rule above's to report.
    condition     = try(timecmp(var.expiration, plantimestamp()) > 0, true)
    error_message = "expiration is in the past: the API server would refuse this token. Make a new token with a future expiration (docs/operators.md, \"Node credentials: bootstrap tokens or client certificates\")."
  }
}

variable "api_server_url" {
  description = "The API server URL the nodes reach, e.g. \"https://api.example.com:443\" (the server of the bootstrap kubeconfig)."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^https://[^[:space:]/?#]+(/[^[:space:]?#]*)?$", var.api_server_url))
    error_message = "api_server_url must be an https:// URL without spaces, query or fragment, such as \"https://api.example.com:443\"."
  }
}

variable "cluster_ca" {
  description = "The cluster CA certificate (PEM): the bootstrap kubeconfig trusts it for the API server, and the controller manager signs the nodes' certificates with it."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^\\s*-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\\s]+-----END CERTIFICATE-----\\s*$", var.cluster_ca))
    error_message = "cluster_ca must be one PEM certificate (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----), such as the assets' tls/ca.crt."
  }
}

variable "extra_group" {
  description = "The group the token adds to its user beyond system:bootstrappers (the Secret's auth-extra-groups), so audit logs and narrower bindings can tell this module's tokens apart. It must start with \"system:bootstrappers:\"."
  type        = string
  default     = "system:bootstrappers:node-bootstrap"
  nullable    = false

  validation {
    condition     = can(regex("^system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]$", var.extra_group))
    error_message = "extra_group must be \"system:bootstrappers:\" followed by lowercase letters, digits, \":\" or \"-\", ending in a letter or digit (the API server ignores a token with any other group)."
  }
}

variable "description" {
  description = "The Secret's human-readable description (kubectl -n kube-system get secret bootstrap-token-<id> shows it)."
  type        = string
  default     = "node-bootstrap: lets a new node ask for its kubelet client certificate"
  nullable    = false

  validation {
    condition     = length(var.description) <= 256 && !can(regex("[\\x00-\\x1f]", var.description))
    error_message = "description must be one line of at most 256 characters."
  }
}
