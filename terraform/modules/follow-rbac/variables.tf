variable "namespace" {
  description = "Where the follow lease and the operator's ConfigMap live (the agent's follow.namespace)."
  type        = string
  default     = "kube-system"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", var.namespace))
    error_message = "namespace must be a Kubernetes namespace name (lowercase letters, digits, \"-\"; at most 63)."
  }
}

variable "name" {
  description = "The name of the operator's ConfigMap (the agent's follow.config_map, \"node-bootstrap-follow\" by default); the follow lease's ConfigMap is \"<name>-lease\" (the agent's follow.lease), the Role and RoleBinding are \"<name>\"."
  type        = string
  default     = "node-bootstrap-follow"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$", var.name))
    error_message = "name must be a Kubernetes object name (lowercase letters, digits, \"-\", \".\")."
  }
}

variable "minor" {
  description = "The Kubernetes minor version the nodes may move to, e.g. \"1.21\" (the ConfigMap's data.minor). null: patch releases of each node's own minor only. Set it once the control plane runs that minor; nodes never take a kubelet newer than the API server."
  type        = string
  default     = null

  validation {
    condition     = var.minor == null || can(regex("^[0-9]+\\.[0-9]+$", coalesce(var.minor, "0.0")))
    error_message = "minor must be a Kubernetes minor version such as \"1.21\", or null."
  }
}

variable "max_changing" {
  description = "How many nodes may change their kubelet at once (the follow lease's holders; the ConfigMap's data.maxChanging)."
  type        = number
  default     = 1
  nullable    = false

  validation {
    condition     = var.max_changing >= 1 && var.max_changing <= 1000 && floor(var.max_changing) == var.max_changing
    error_message = "max_changing must be a whole number from 1 to 1000."
  }
}

variable "max_not_ready" {
  description = "How many nodes may be not Ready at once, counting the one about to change: no node starts a change while that many others are not Ready (the ConfigMap's data.maxNotReady)."
  type        = number
  default     = 1
  nullable    = false

  validation {
    condition     = var.max_not_ready >= 1 && var.max_not_ready <= 1000 && floor(var.max_not_ready) == var.max_not_ready
    error_message = "max_not_ready must be a whole number from 1 to 1000."
  }
}

variable "delete_emptydir_data" {
  description = "Whether the drain of a minor change may evict pods with emptyDir volumes, whose data goes with them (the ConfigMap's data.deleteEmptyDirData, as kubectl drain --delete-emptydir-data). false: such a pod keeps its node from starting the change, and the node says so."
  type        = bool
  default     = false
  nullable    = false
}
