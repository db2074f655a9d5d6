output "manifest" {
  description = "The follow lease (a ConfigMap), the Role and the RoleBinding (YAML, three documents): apply once per cluster, e.g. among the bootkube master's first manifests or with `kubectl apply -f`. Apply it again only with no change under way: it empties the lease's holders."
  value       = local.rbac_manifest
}

output "config_map" {
  description = "The follow ConfigMap (YAML) with minor, max_changing and max_not_ready. Apply it, then change the rollout by editing it (`kubectl -n <namespace> edit configmap <name>`) or by rendering it again."
  value       = local.config_map_manifest
}
