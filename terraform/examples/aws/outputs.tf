output "bucket" {
  description = "The assets bucket."
  value       = module.assets.bucket
}

output "bundle_url" {
  description = "s3:// URL of the asset bundle."
  value       = module.assets.bundle_url
}

output "bootkube_master_private_ip" {
  description = "Private IP of the bootkube master."
  value       = aws_instance.bootkube_master.private_ip
}

output "worker_private_ips" {
  description = "Private IPs of the workers."
  value       = aws_instance.worker[*].private_ip
}

output "follow_rbac" {
  description = "With follow: YAML to `kubectl apply` once on the cluster before the nodes follow (docs/operators.md, \"Following the cluster's version (day two)\"). Absent without follow."
  value       = var.follow ? module.follow[0].manifest : null
}

output "follow_config" {
  description = "With follow: the operator's follow ConfigMap (YAML) to `kubectl apply` once. Absent without follow."
  value       = var.follow ? module.follow[0].config_map : null
}
