output "rendered" {
  description = "The pointer config (JSON), to use as the node's user data."
  value       = local.rendered
}
