output "assets_sha256" {
  description = "SHA-256 of the assets manifest (one \"sha256  path\" line per file): changes exactly when the pushed contents change."
  value       = terraform_data.assets.output.assets_sha256
}

output "files" {
  description = "The asset files pushed, relative to target_dir."
  value       = local.files
}

output "target_dir" {
  description = "Where the assets are on the node."
  value       = var.target_dir
}

output "id" {
  description = "ID of the push; changes on every push (useful for depends_on / triggers downstream)."
  value       = terraform_data.assets.id
}
