output "ignition_configs" {
  description = "Worker name => Ignition config (JSON) to serve to it; the same as the files in ignition_dir. Sensitive: each carries the bootstrap token."
  value       = { for n in var.workers : n => module.worker.rendered }
  sensitive   = true
}

output "ignition_files" {
  description = "Worker name => the file its config was written to (none when ignition_dir is null)."
  value       = { for n, f in terraform_data.ignition_file : n => f.triggers_replace.path }
}

output "enabled_units" {
  description = "The units a worker's Ignition config enables."
  value       = module.worker.enabled_units
}

output "token_manifests" {
  description = "File name => YAML: the token's Secret and the RBAC for kubelet TLS bootstrapping, for `kubectl apply` on a control plane that did not make the token itself (docs/operators.md, \"The control plane\"). Sensitive."
  value       = module.bootstrap_token.manifests
  sensitive   = true
}

output "follow_rbac" {
  description = "With follow: YAML to `kubectl apply` once on the cluster before the workers boot (docs/operators.md, \"Following the cluster's version (day two)\"): the follow lease (a ConfigMap with no holder), a Role and RoleBinding letting system:nodes get and update it and read the operator's ConfigMap. Absent without follow."
  value       = var.follow ? module.follow[0].manifest : null
}

output "follow_config" {
  description = "With follow: the operator's follow ConfigMap (YAML) to `kubectl apply` once, then edit as the rollout goes (a minor named there when one is due). Absent without follow."
  value       = var.follow ? module.follow[0].config_map : null
}
