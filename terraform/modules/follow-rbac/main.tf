# What the nodes that follow their cluster's Kubernetes version
# (`node-bootstrap follow`, the ignition module's `follow` switch) need in
# the cluster, the least that works, with built-in functions only:
#
# - the follow lease, a ConfigMap created here with no data, so the nodes
#   need not create ConfigMaps (a create cannot be narrowed to one name).
#   It declares no data at all: `kubectl apply` of this manifest again
#   (terraform renders the same) never touches the keys the nodes wrote
#   (one per node, `node.<name>`: a halt stays halted), and
#   `kubectl create` of it fails harmlessly once it exists. Not a
#   coordination.k8s.io Lease: the NodeRestriction admission plugin
#   refuses a node every Lease but its own heartbeat Lease in
#   kube-node-lease, whatever RBAC says;
# - a Role in var.namespace letting the group system:nodes (every
#   kubelet's identity, system:node:<name>) get, update and patch that
#   one ConfigMap (a take updates it over the version read; a node's other
#   writes patch its own key) and get the operator's; a RoleBinding;
# - a Role in `default` letting them get the `kubernetes` Endpoints (the
#   API servers' addresses: before a node takes a place it asks each API
#   server's /version, so that an HA control plane half upgraded is seen
#   as such); a RoleBinding;
# - the operator's ConfigMap (a separate manifest: the operator edits it
#   as the rollout goes, `kubectl edit`, or renders it again here).
#
# What the Node authorizer and the NodeRestriction admission plugin already
# allow a kubelet's identity, as Kubernetes 1.32 and later narrow them
# (AuthorizeNodeWithSelectors), so nothing here grants it: read /version;
# read and patch its own Node (spec.unschedulable for the cordon of a minor
# change; not its taints), never another's nor a list of Nodes; list its
# own pods (fieldSelector spec.nodeName) and evict those bound to itself
# (the Eviction API, which honours PodDisruptionBudgets); create Events.
# What they do not: any ConfigMap its pods do not use; and what
# NodeRestriction refuses whatever RBAC says: any Lease but its own in
# kube-node-lease.
#
# Who may write the lease: every node, the whole ConfigMap (RBAC cannot
# narrow an update to one key). A node could halt the rollout, remove
# others' entries or write what every node refuses; it cannot name a
# target (the operator's ConfigMap is read-only to nodes).
# docs/security-review.md says so, and how an admission policy confines
# each node to its own key where the API server has one.

locals {
  lease_name = "${var.name}-lease"

  rbac_manifest = <<-EOT
    # Rendered by terraform/modules/follow-rbac: the follow lease and what
    # the nodes may do with it, the operator's ConfigMap and the API
    # servers' Endpoints. Once per cluster; applying it again changes
    # nothing of a rollout (the lease declares no data).
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: ${local.lease_name}
      namespace: ${var.namespace}
    ---
    apiVersion: rbac.authorization.k8s.io/v1
    kind: Role
    metadata:
      name: ${var.name}
      namespace: ${var.namespace}
    rules:
    - apiGroups: [""]
      resources: ["configmaps"]
      resourceNames: ["${local.lease_name}"]
      verbs: ["get", "update", "patch"]
    - apiGroups: [""]
      resources: ["configmaps"]
      resourceNames: ["${var.name}"]
      verbs: ["get"]
    ---
    apiVersion: rbac.authorization.k8s.io/v1
    kind: RoleBinding
    metadata:
      name: ${var.name}
      namespace: ${var.namespace}
    roleRef:
      apiGroup: rbac.authorization.k8s.io
      kind: Role
      name: ${var.name}
    subjects:
    - apiGroup: rbac.authorization.k8s.io
      kind: Group
      name: system:nodes
    ---
    apiVersion: rbac.authorization.k8s.io/v1
    kind: Role
    metadata:
      name: ${var.name}-apiservers
      namespace: default
    rules:
    - apiGroups: [""]
      resources: ["endpoints"]
      resourceNames: ["kubernetes"]
      verbs: ["get"]
    ---
    apiVersion: rbac.authorization.k8s.io/v1
    kind: RoleBinding
    metadata:
      name: ${var.name}-apiservers
      namespace: default
    roleRef:
      apiGroup: rbac.authorization.k8s.io
      kind: Role
      name: ${var.name}-apiservers
    subjects:
    - apiGroup: rbac.authorization.k8s.io
      kind: Group
      name: system:nodes
    EOT

  # Every value a JSON string, which is also a YAML string.
  config_map_data = merge(
    {
      maxChanging = tostring(var.max_changing)
      maxNotReady = tostring(var.max_not_ready)
    },
    var.minor != null ? { minor = var.minor } : {},
    var.delete_emptydir_data ? { deleteEmptyDirData = "true" } : {},
  )

  config_map_manifest = join("", [
    "# Rendered by terraform/modules/follow-rbac: the operator's word on the\n",
    "# rollout (docs/operators.md, \"Following the cluster's version\").\n",
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n",
    "  name: ${var.name}\n  namespace: ${var.namespace}\ndata:\n",
    join("", [for k in sort(keys(local.config_map_data)) : "  ${k}: ${jsonencode(local.config_map_data[k])}\n"]),
  ])
}
