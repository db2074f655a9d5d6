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
