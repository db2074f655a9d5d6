output "rendered" {
  description = "The Ignition config (JSON). Use it as the node's user data, or store it and point the node at it (see the ignition-pointer module). Sensitive: it carries the kubeconfig or the bootstrap kubeconfig."
  value       = local.rendered
  sensitive   = true

  precondition {
    # On a sensitive copy, so the error never prints the kubeconfig.
    condition     = can(yamldecode(local.kubeconfig).clusters[0].cluster.server)
    error_message = "${local.bootstrap ? "bootstrap_kubeconfig" : "kubeconfig"} must be a kubeconfig (YAML or JSON) with at least one cluster that has a server."
  }
  precondition {
    condition     = (var.kubeconfig == null) != (var.bootstrap_kubeconfig == null)
    error_message = "give exactly one of kubeconfig (a shared kubeconfig with long-lived client credentials) and bootstrap_kubeconfig (a bootstrap token the kubelet trades for its own certificate; see the bootstrap-token module)."
  }
  precondition {
    condition     = !local.bootstrap || local.bootstrap_only_token
    error_message = "bootstrap_kubeconfig must carry a bootstrap token and nothing else: exactly one user whose only field is token (no client certificate or key, password, token file or exec plugin: the node earns its own certificate)."
  }
  precondition {
    condition     = !local.bootstrap || !local.bootstrap_only_token || local.bootstrap_token_valid
    error_message = "bootstrap_kubeconfig's token is not a bootstrap token: it must be \"<id>.<secret>\" with 6 and 16 characters of [a-z0-9] (lowercase letters and digits)."
  }
  precondition {
    condition     = length(local.missing_unit_files) == 0
    error_message = "units_dir: no ${join(", ", local.missing_unit_files)} in ${local.units_dir}. The module reads the unit files from the repository's units/ beside it; used from an absolute path or a registry, terraform copies the module away from them: set units_dir to <checkout>/units, or use the module by a relative or git source."
  }
  precondition {
    condition     = !local.keyring_is_secret
    error_message = "keyring holds a secret (private) key: give the public key only (gpg --export --armor KEYID), and keep the secret key off every node. Its content is not shown."
  }
  precondition {
    condition     = local.keyring_is_secret || local.keyring_is_public
    error_message = "keyring must be ASCII-armored OpenPGP public keys (starting with -----BEGIN PGP PUBLIC KEY BLOCK-----), or null. Its content is not shown."
  }
  precondition {
    condition     = local.has_keyring || !local.needs_sources_keyring
    error_message = "keyring is null, but agent_config searches ${join(" and ", local.signed_locations)} for metadata it accepts only signed (kubelet.backend \"auto\" or \"sysext\", addon.package_source \"metadata\" or agent.upgrade), and the node would have no key at ${local.keyring_path_default} to verify it: set keyring to the mirror's public key, or add the location (\"url\", \"bucket\", \"default\") to agent_config.sources.allow_unsigned."
  }
  precondition {
    condition     = local.has_keyring || !local.needs_addon_keyring
    error_message = "keyring is null, but agent_config's addon takes docker from a torcx manifest, which the node accepts only signed, and it would have no key at ${local.keyring_path_default} to verify it: set keyring to the manifest's signing key, or set agent_config.addon.allow_unsigned."
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
