output "manifest" {
  description = "The follow lease (a ConfigMap declaring no data), the Roles and RoleBindings (YAML, five documents): apply once per cluster, e.g. among the bootkube master's first manifests or with `kubectl apply -f`. Applying it again changes nothing of a rollout: the keys the nodes write in the lease are never declared here."
  value       = local.rbac_manifest
}

output "config_map" {
  description = "The follow ConfigMap (YAML) with minor, max_changing and max_not_ready. Apply it, then change the rollout by editing it (`kubectl -n <namespace> edit configmap <name>`) or by rendering it again."
  value       = local.config_map_manifest
}
