# A bootstrap token for kubelet TLS bootstrapping, with built-in functions
# only:
#
# - the bootstrap kubeconfig a node starts with (API server URL, cluster CA,
#   the token): the agent reads /version with it, and the kubelet uses it
#   (--bootstrap-kubeconfig) only to ask for its own client certificate;
# - the token's Secret (kube-system/bootstrap-token-<id>, type
#   bootstrap.kubernetes.io/token) for the API server's bootstrap token
#   authenticator (--enable-bootstrap-token-auth): the user is
#   system:bootstrap:<id> in system:bootstrappers and extra_group;
# - the RBAC that lets such a user ask for a node client certificate and
#   lets the controller manager's approver sign first requests of
#   bootstrappers and renewals of nodes automatically.
#
# The Secret and the RBAC are the bootkube master's first manifests (put
# them in the assets' manifests/). The RBAC is the same for every token:
# apply it once per cluster.

locals {
  # Checked by the outputs' preconditions (never printed).
  token_valid = can(regex("^[a-z0-9]{16}$", var.token_secret))
  # The id is public once it is one: 6 characters of [a-z0-9] cannot hold
  # the secret. Anything else (a whole "<id>.<secret>" pasted in) fails the
  # variable's validation, stays sensitive and is used nowhere.
  token_id_valid = can(regex("^[a-z0-9]{6}$", var.token_id))
  token_id       = local.token_id_valid ? nonsensitive(var.token_id) : "invalid"
  token          = sensitive("${local.token_id}.${var.token_secret}")

  secret_name = "bootstrap-token-${local.token_id}"

  kubeconfig = sensitive(<<-EOT
    # Bootstrap kubeconfig rendered by terraform/modules/bootstrap-token.
    # A secret: its token lets anyone ask for a node client certificate
    # until the token expires or its Secret is deleted.
    apiVersion: v1
    kind: Config
    clusters:
    - name: cluster
      cluster:
        server: ${var.api_server_url}
        certificate-authority-data: ${base64encode(var.cluster_ca)}
    users:
    - name: kubelet-bootstrap
      user:
        token: "${local.token}"
    contexts:
    - name: kubelet-bootstrap
      context:
        cluster: cluster
        user: kubelet-bootstrap
    current-context: kubelet-bootstrap
    EOT
  )

  # Every value is written as a JSON string, which is also a YAML string.
  secret_manifest = sensitive(<<-EOT
    # Rendered by terraform/modules/bootstrap-token. A secret: it holds a
    # bootstrap token. The API server accepts the token until expiration;
    # the controller manager's tokencleaner deletes this Secret then.
    apiVersion: v1
    kind: Secret
    metadata:
      name: ${local.secret_name}
      namespace: kube-system
    type: bootstrap.kubernetes.io/token
    stringData:
      description: ${jsonencode(var.description)}
      token-id: ${jsonencode(local.token_id)}
      token-secret: ${jsonencode(var.token_secret)}
      expiration: ${jsonencode(var.expiration)}
      usage-bootstrap-authentication: "true"
      auth-extra-groups: ${jsonencode(var.extra_group)}
    EOT
  )

  # name => (cluster role, group).
  bindings = {
    # Bootstrappers may create certificate signing requests (and read them).
    "node-bootstrap:node-bootstrapper" = ["system:node-bootstrapper", "system:bootstrappers"]
    # The controller manager's approver approves a bootstrapper's request
    # for a node client certificate (signer
    # kubernetes.io/kube-apiserver-client-kubelet, CN=system:node:<name>,
    # O=system:nodes) ...
    "node-bootstrap:approve-node-client-csr" = ["system:certificates.k8s.io:certificatesigningrequests:nodeclient", "system:bootstrappers"]
    # ... and a node's request to renew its own (rotateCertificates).
    "node-bootstrap:approve-node-client-renewal" = ["system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"]
  }

  rbac_manifest = join("", [
    "# Rendered by terraform/modules/bootstrap-token: kubelet TLS bootstrapping\n",
    "# and automatic approval of node client certificates. Once per cluster.\n",
    join("---\n", [for name in sort(keys(local.bindings)) : <<-EOT
      apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRoleBinding
      metadata:
        name: ${name}
      roleRef:
        apiGroup: rbac.authorization.k8s.io
        kind: ClusterRole
        name: ${local.bindings[name][0]}
      subjects:
      - apiGroup: rbac.authorization.k8s.io
        kind: Group
        name: ${local.bindings[name][1]}
      EOT
    ]),
  ])
}
