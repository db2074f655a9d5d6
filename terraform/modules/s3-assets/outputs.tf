output "bucket" {
  description = "Name of the bucket."
  value       = aws_s3_bucket.assets.id
}

output "bucket_arn" {
  description = "ARN of the bucket."
  value       = aws_s3_bucket.assets.arn
}

output "region" {
  description = "Region of the bucket."
  value       = data.aws_region.current.id
}

output "bundle_key" {
  description = "Object key of the asset bundle."
  value       = aws_s3_object.bundle.key
}

output "bundle_url" {
  description = "s3:// URL of the asset bundle."
  value       = "s3://${aws_s3_bucket.assets.id}/${aws_s3_object.bundle.key}"
}

output "bundle_sha256" {
  description = "SHA-256 (hex) of the bundle, for the agent's assets.s3.checksum_sha256."
  value       = filesha256(var.bundle_path)
}

output "ignition_urls" {
  description = "Name => s3:// URL of each stored Ignition config (for the ignition-pointer module)."
  value       = { for k, o in aws_s3_object.ignition : k => "s3://${aws_s3_bucket.assets.id}/${o.key}" }
}

output "read_policies" {
  description = "Role name => the IAM policy (JSON) attached to it."
  value       = { for r, d in data.aws_iam_policy_document.read : r => d.json }
}
