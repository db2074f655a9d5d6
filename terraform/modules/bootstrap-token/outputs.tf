# The token's id and secret are checked once each, by preconditions on
# token_id (every output is evaluated, used or not, so a malformed token
# fails the plan with one error each), on sensitive values never printed.

output "kubeconfig" {
  description = "The bootstrap kubeconfig (YAML): the API server URL, the cluster CA and the token. Give it to the ignition module as bootstrap_kubeconfig (written to /etc/kubernetes/bootstrap-kubeconfig, mode 0600). Sensitive."
  value       = local.kubeconfig
  sensitive   = true
}

output "token" {
  description = "The bootstrap token, \"<id>.<secret>\". Sensitive."
  value       = local.token
  sensitive   = true
}

output "token_id" {
  description = "The token's id: the API server authenticates it as user system:bootstrap:<id>."
  value       = local.token_id

  precondition {
    condition     = local.token_id_valid
    error_message = "token_id must be exactly 6 characters of [a-z0-9] (lowercase letters and digits), the first half of a bootstrap token \"<id>.<secret>\" (its value is not shown: a whole token pasted here would be a secret)."
  }
  precondition {
    condition     = local.token_valid
    error_message = "token_secret must be exactly 16 characters of [a-z0-9] (lowercase letters and digits), the second half of a bootstrap token \"<id>.<secret>\"."
  }
}

output "secret_name" {
  description = "The token's Secret in kube-system (bootstrap-token-<id>): delete it to revoke the token at once."
  value       = local.secret_name
}

output "token_secret_manifest" {
  description = "The token's Secret (YAML) for the bootkube master's manifests/ (or kubectl apply -f). Sensitive."
  value       = local.secret_manifest
  sensitive   = true
}

output "rbac_manifest" {
  description = "Three ClusterRoleBindings (YAML, one document each): node-bootstrapper and automatic approval of node client certificates for system:bootstrappers, and of their renewals for system:nodes. The same for every token: apply once per cluster."
  value       = local.rbac_manifest
}

output "manifests" {
  description = "File name => YAML for the bootkube master's manifests/ directory: \"bootstrap-token-<id>.yaml\" (the Secret) and \"node-bootstrap-rbac.yaml\" (the bindings). Sensitive."
  value = {
    "${local.secret_name}.yaml" = local.secret_manifest
    "node-bootstrap-rbac.yaml"  = local.rbac_manifest
  }
  sensitive = true
}
