output "rendered" {
  description = "The Ignition config (JSON). Use it as the node's user data, or store it and point the node at it (see the ignition-pointer module). Sensitive: it carries the kubeconfig."
  value       = local.rendered
  sensitive   = true

  precondition {
    # On a sensitive copy, so the error never prints the kubeconfig.
    condition     = can(yamldecode(local.kubeconfig).clusters[0].cluster.server)
    error_message = "kubeconfig must be a kubeconfig (YAML or JSON) with at least one cluster that has a server."
  }
  precondition {
    condition     = can(regex("^\\s*-----BEGIN CERTIFICATE-----", local.kubelet_client_ca))
    error_message = "kubelet_client_ca is null and the kubeconfig's first cluster has no certificate-authority-data to take the kubelet's client CA from; set kubelet_client_ca."
  }
}

output "sha512" {
  description = "SHA-512 of the rendered config (hex), for an Ignition pointer config's verification."
  value       = nonsensitive(sha512(local.rendered))
}

output "units" {
  description = "The units embedded in the config, in order."
  value       = local.unit_names
}

output "enabled_units" {
  description = "The units Ignition enables."
  value       = local.enabled_units
}

output "files" {
  description = "The paths of the files Ignition writes."
  value       = [for f in local.files : f.path]
}
