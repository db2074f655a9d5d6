output "ignition_configs" {
  description = "Node name => Ignition config (JSON) to serve to that node; the same as the files in ignition_dir. Sensitive: each carries the node's credential."
  value       = local.configs
  sensitive   = true
}

output "ignition_files" {
  description = "Node name => the file its config was written to (null: ignition_dir is null)."
  value       = { for n, f in terraform_data.ignition_file : n => f.triggers_replace.path }
}

output "enabled_units" {
  description = "Node name => the units its Ignition config enables."
  value       = local.enabled_units
}

output "assets_sha256" {
  description = "SHA-256 of the pushed assets' manifest (null until push_assets is true)."
  value       = one(module.assets[*].assets_sha256)
}

output "follow_rbac" {
  description = "With follow: YAML to `kubectl apply` once on the cluster (or to put in the assets' manifests/) before the nodes follow (docs/operators.md, \"Following the cluster's version (day two)\"): the follow lease, a Role and RoleBinding letting system:nodes get and update it and read the operator's ConfigMap. Absent without follow."
  value       = var.follow ? module.follow[0].manifest : null
}

output "follow_config" {
  description = "With follow: the operator's follow ConfigMap (YAML) to `kubectl apply` once, then edit as the rollout goes. Absent without follow."
  value       = var.follow ? module.follow[0].config_map : null
}
