# The token's secret is checked once, by a precondition on token_id (every
# output is evaluated, used or not, so a malformed secret fails the plan with
# one error), on a sensitive value that is never printed.

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
  value       = var.token_id

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
