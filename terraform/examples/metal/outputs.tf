output "ignition_configs" {
  description = "Node name => Ignition config (JSON) to serve to that node. Sensitive: each carries the kubeconfig."
  value       = { for n, m in module.ignition : n => m.rendered }
  sensitive   = true
}

output "enabled_units" {
  description = "Node name => the units its Ignition config enables."
  value       = { for n, m in module.ignition : n => m.enabled_units }
}

output "assets_sha256" {
  description = "SHA-256 of the pushed assets' manifest."
  value       = module.assets.assets_sha256
}
