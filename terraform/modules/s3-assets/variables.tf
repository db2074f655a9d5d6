variable "bucket_name" {
  description = "Name of the bucket to create for the cluster's assets and Ignition configs. null: a unique name starting with bucket_prefix."
  type        = string
  default     = null

  validation {
    condition     = var.bucket_name == null || can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", coalesce(var.bucket_name, "x")))
    error_message = "bucket_name must be a valid S3 bucket name (3-63 lowercase letters, digits, \".\", \"-\"), or null."
  }
}

variable "bucket_prefix" {
  description = "Prefix of the generated bucket name when bucket_name is null."
  type        = string
  default     = "node-bootstrap-assets-"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9.-]{0,36}$", var.bucket_prefix))
    error_message = "bucket_prefix must be at most 37 lowercase letters, digits, \".\" or \"-\"."
  }
}

variable "bundle_path" {
  description = "Local path of the asset bundle (a tar.gz of the assets directory: tar -C generated -czf assets.tar.gz .)."
  type        = string
  nullable    = false

  validation {
    condition     = fileexists(var.bundle_path)
    error_message = "bundle_path must be an existing file (the tar.gz of the assets)."
  }
}

variable "bundle_key" {
  description = "Object key of the asset bundle in the bucket."
  type        = string
  default     = "assets/assets.tar.gz"
  nullable    = false

  validation {
    condition     = can(regex("^[A-Za-z0-9!_.*'()/-]+$", var.bundle_key)) && !startswith(var.bundle_key, "/") && !startswith(var.bundle_key, "ignition/")
    error_message = "bundle_key must be a relative object key of safe characters, not under ignition/ (reserved for the Ignition configs)."
  }
}

variable "bundle_reader_role_names" {
  description = "Names of the IAM roles (of the nodes that pull assets: the bootkube master) allowed to read the bundle."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "ignition_configs" {
  description = "Ignition configs to store, by name: stored at ignition/<name>.ign, readable by reader_role_names only. Point the node at it with the ignition-pointer module (user data is small and readable from instance metadata)."
  type = map(object({
    content           = string
    reader_role_names = list(string)
  }))
  default  = {}
  nullable = false

  validation {
    condition     = alltrue([for k in keys(var.ignition_configs) : can(regex("^[A-Za-z0-9._-]+$", k))])
    error_message = "ignition_configs keys must be plain names (letters, digits, \".\", \"_\", \"-\")."
  }
}

variable "kms_key_arn" {
  description = "ARN of a KMS key to encrypt objects with (SSE-KMS; the readers also get kms:Decrypt through S3). null: SSE-S3 (AES256)."
  type        = string
  default     = null

  validation {
    condition     = var.kms_key_arn == null || can(regex("^arn:aws[a-z-]*:kms:", coalesce(var.kms_key_arn, "x")))
    error_message = "kms_key_arn must be a KMS key ARN (arn:aws:kms:...), or null."
  }
}

variable "force_destroy" {
  description = "Allow terraform destroy to delete the bucket with its objects (and their versions)."
  type        = bool
  default     = false
  nullable    = false
}

variable "tags" {
  description = "Tags for the bucket."
  type        = map(string)
  default     = {}
  nullable    = false
}
