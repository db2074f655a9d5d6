variable "config_url" {
  description = "Where the node's full Ignition config is stored (s3://bucket/key with the instance role's credentials, https://, http://, gs://)."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^(https?|s3|gs)://[^[:space:]]+$", var.config_url))
    error_message = "config_url must be an s3://, https://, http:// or gs:// URL without spaces."
  }
}

variable "config_sha512" {
  description = "SHA-512 (128 lowercase hex digits) of the full config, e.g. the ignition module's sha512 output. Ignition refuses a config that does not match."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^[0-9a-f]{128}$", var.config_sha512))
    error_message = "config_sha512 must be 128 lowercase hex digits."
  }
}

variable "ca_bundle" {
  description = "PEM certificates of a private CA Ignition trusts when fetching config_url over https. null: none."
  type        = string
  default     = null

  validation {
    condition     = var.ca_bundle == null || can(regex("^\\s*-----BEGIN CERTIFICATE-----", var.ca_bundle))
    error_message = "ca_bundle must be PEM certificates (starting with -----BEGIN CERTIFICATE-----), or null."
  }
}
