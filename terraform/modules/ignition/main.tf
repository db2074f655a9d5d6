# Renders an Ignition config (spec 3.3.0, as Flatcar / Container Linux read
# it) for one node, with built-in functions only.
#
# The units are read from the repository's units/ directory at plan time and
# embedded verbatim: units/ is the one source of truth, so a unit edited there
# shows up in every rendered config with no other change.

locals {
  units_dir = var.units_dir != null ? var.units_dir : "${path.module}/../../../units"

  bootkube_master = var.role == "bootkube-master"
  pull            = var.assets_mode == "pull"

  # Every node: the bootstrap unit and the kubelet, both enabled, and the
  # unit that adds the agent's journal catalog.
  # The bootkube master: the path units are enabled; the services they
  # trigger are installed but not enabled.
  # Pull mode: init-assets.service, enabled.
  # Day two (var.follow): the follow service, its timer and the boot-time
  # converge unit; the timer and the converge unit enabled.
  unit_names = concat(
    ["k8s-node-bootstrap.service", "kubelet.service", "node-bootstrap-catalog.service"],
    local.bootkube_master ? ["bootkube.path", "bootkube.service", "tectonic.path", "tectonic.service"] : [],
    local.pull ? ["init-assets.service"] : [],
    var.follow ? ["node-bootstrap-follow.service", "node-bootstrap-follow.timer", "node-bootstrap-follow-converge.service"] : [],
  )
  enabled_units = concat(
    ["k8s-node-bootstrap.service", "kubelet.service", "node-bootstrap-catalog.service"],
    local.bootkube_master ? ["bootkube.path", "tectonic.path"] : [],
    local.pull ? ["init-assets.service"] : [],
    var.follow ? ["node-bootstrap-follow.timer", "node-bootstrap-follow-converge.service"] : [],
  )

  # kubelet.backend in the agent config: "auto" (the agent's default) takes
  # the kubelet sysext on every release without kubelet-wrapper (Flatcar
  # 2857.0.0 and newer: every release that reads this spec 3.3.0 config),
  # kubelet-wrapper where the release has it; the agent decides on the node
  # and puts kubelet.service's drop-in units/kubelet-sysext.conf in place
  # (ExecStart=/usr/bin/kubelet of the merged extension) before the kubelet
  # can start. With "sysext" named outright, the drop-in is written here too.
  kubelet_backend = coalesce(try(jsondecode(var.agent_config).kubelet.backend, null), "auto")
  kubelet_sysext  = local.kubelet_backend == "sysext"

  # Every file read from units_dir; a missing one fails the plan naming
  # units_dir (outputs.tf), not with file()'s own error.
  unit_files         = concat(local.unit_names, ["node-bootstrap.catalog"], local.kubelet_sysext ? ["kubelet-sysext.conf"] : [])
  missing_unit_files = [for f in local.unit_files : f if !fileexists("${local.units_dir}/${f}")]

  units = [
    for name in local.unit_names : merge(
      {
        name     = name
        enabled  = contains(local.enabled_units, name)
        contents = try(file("${local.units_dir}/${name}"), "")
      },
      name == "kubelet.service" ? {
        dropins = concat(
          [{ name = "10-node.conf", contents = local.kubelet_dropin }],
          local.kubelet_sysext ? [{ name = "10-kubelet-sysext.conf", contents = try(file("${local.units_dir}/kubelet-sysext.conf"), "") }] : [],
        )
      } : {},
    )
  ]

  # What the kubelet of this node registers with, per role: the role label
  # (node.kubernetes.io/role: a kubelet may set labels in that namespace on
  # its own Node; node-role.kubernetes.io/* it may not, since 1.16), the
  # master's taint, the cluster DNS, extra flags. kubelet.service reads
  # the labels from this drop-in's environment; the taints, cluster DNS
  # and domain go to the agent (agent_config.kubelet_config), which writes
  # them as the cluster's kubelet version takes them.
  node_role   = var.role == "worker" ? "worker" : "master"
  node_labels = merge(var.node_labels, { "node.kubernetes.io/role" = local.node_role })
  node_taints = var.node_taints != null ? var.node_taints : (
    local.node_role == "master" ? ["node-role.kubernetes.io/master=:NoSchedule"] : []
  )
  kubelet_dropin = join("", [
    "# Rendered by terraform/modules/ignition for a ${var.role} node.\n",
    "[Service]\n",
    "Environment=\"KUBELET_NODE_LABELS=${join(",", [for k in sort(keys(local.node_labels)) : "${k}=${local.node_labels[k]}"])}\"\n",
    "Environment=\"KUBELET_EXTRA_ARGS=${join(" ", var.kubelet_extra_args)}\"\n",
  ])

  # The node's credential: a shared kubeconfig (client certificate or
  # static token, used as it is) or a bootstrap kubeconfig (a bootstrap
  # token the kubelet trades for a client certificate of its own). Exactly
  # one is given (a precondition in outputs.tf checks it).
  bootstrap       = nonsensitive(var.bootstrap_kubeconfig != null)
  kubeconfig      = sensitive(local.bootstrap ? var.bootstrap_kubeconfig : coalesce(var.kubeconfig, "{}"))
  kubeconfig_path = local.bootstrap ? "/etc/kubernetes/bootstrap-kubeconfig" : "/etc/kubernetes/kubeconfig"

  # What the bootstrap kubeconfig's user carries: a bootstrap token and
  # nothing else (checked in outputs.tf, never printed).
  bootstrap_users       = try(yamldecode(local.kubeconfig).users, [])
  bootstrap_only_token  = length(local.bootstrap_users) == 1 && try(keys(local.bootstrap_users[0].user), []) == ["token"]
  bootstrap_token_valid = can(regex("^[a-z0-9]{6}\\.[a-z0-9]{16}$", local.bootstrap_users[0].user.token))

  # The CA the kubelet trusts for client certificates (the API server's):
  # given, or the kubeconfig's first cluster's CA.
  kubelet_client_ca = var.kubelet_client_ca != null ? var.kubelet_client_ca : sensitive(
    try(base64decode(yamldecode(local.kubeconfig).clusters[0].cluster["certificate-authority-data"]), "")
  )

  # The agent config: the caller's object with role and assets.mode set from
  # this module's inputs (validation ensures they do not contradict it),
  # cluster.credential "bootstrap-token" with a bootstrap kubeconfig (with a
  # shared kubeconfig the agent's default, "kubeconfig", applies), the
  # join watched for 30 minutes after kubelet.env (cluster.join_watch_secs,
  # unless the caller's config sets it), follow.enabled with var.follow,
  # and the metrics textfile in
  # node_exporter's usual directory unless the caller's config has a
  # metrics section of its own.
  agent_config_in = jsondecode(var.agent_config)
  agent_config = merge(
    { metrics = { textfile_dir = "/var/lib/node_exporter/textfile_collector" } },
    local.agent_config_in,
    {
      role   = var.role
      assets = merge(try(local.agent_config_in.assets, {}), { mode = var.assets_mode })
    },
    {
      cluster = merge(
        { join_watch_secs = 1800 },
        try(local.agent_config_in.cluster, {}),
        local.bootstrap ? { credential = "bootstrap-token" } : {},
      )
    },
    var.follow ? {
      follow = merge(try(local.agent_config_in.follow, {}), { enabled = true })
    } : {},
    {
      kubelet_config = merge(try(local.agent_config_in.kubelet_config, {}), {
        cluster_dns    = [var.cluster_dns_ip]
        cluster_domain = var.cluster_domain
        taints         = local.node_taints
      })
    },
  )

  seed_kubelet_env = join("", [
    "KUBELET_IMAGE_URL=\"${var.kubelet_image_url}\"\n",
    "KUBELET_IMAGE_TAG=\"${var.kubelet_image_tag}\"\n",
  ])

  # The journal catalog, as a system extension directory: /usr is
  # read-only on Flatcar; systemd-sysext merges the directory into /usr at
  # boot (any OS: ID=_any), and node-bootstrap-catalog.service adds it to
  # the catalog database.
  sysext_dir = "/etc/extensions/node-bootstrap"

  # Small files travel inline as base64 data URLs.
  data_files = concat(
    [
      { path = "/etc/node-bootstrap/config.json", mode = 420, text = "${jsonencode(local.agent_config)}\n" },
      { path = "/etc/kubernetes/installer/kubelet.env", mode = 420, text = local.seed_kubelet_env },
      { path = "/etc/kubernetes/installer/runtime-mappings.yaml", mode = 420, text = var.runtime_mappings },
      { path = local.kubeconfig_path, mode = 384, text = local.kubeconfig },
      { path = "/etc/kubernetes/ca.crt", mode = 420, text = local.kubelet_client_ca },
    ],
    local.has_keyring ? [{ path = "/etc/kubernetes/installer/keyring.asc", mode = 420, text = var.keyring }] : [],
    var.ca_bundle != null ? [{ path = "/etc/ssl/certs/node-bootstrap-ca.pem", mode = 420, text = var.ca_bundle }] : [],
    [
      { path = "${local.sysext_dir}/usr/lib/systemd/catalog/node-bootstrap.catalog", mode = 420, text = try(file("${local.units_dir}/node-bootstrap.catalog"), "") },
      { path = "${local.sysext_dir}/usr/lib/extension-release.d/extension-release.node-bootstrap", mode = 420, text = "ID=_any\n" },
    ],
  )

  agent_file = {
    path      = "/opt/bin/node-bootstrap"
    mode      = 493 # 0755
    overwrite = true
    contents = merge(
      {
        source       = var.agent_url
        verification = { hash = "sha512-${var.agent_sha512}" }
      },
      length(var.agent_http_headers) > 0 ? {
        httpHeaders = [for k in sort(keys(var.agent_http_headers)) : { name = k, value = var.agent_http_headers[k] }]
      } : {},
    )
  }

  files = concat([local.agent_file], [
    for f in local.data_files : {
      path      = f.path
      mode      = f.mode
      overwrite = true
      contents  = { source = "data:;base64,${base64encode(f.text)}" }
    }
  ])

  ignition = merge(
    {
      version = "3.3.0"
    },
    var.ca_bundle != null ? {
      security = { tls = { certificateAuthorities = [{ source = "data:;base64,${base64encode(var.ca_bundle)}" }] } }
    } : {},
  )

  config = merge(
    {
      ignition = local.ignition
      storage  = { files = local.files }
      systemd  = { units = local.units }
    },
    length(var.ssh_authorized_keys) > 0 ? {
      passwd = { users = [{ name = var.ssh_user, sshAuthorizedKeys = [for k in var.ssh_authorized_keys : trimspace(k)] }] }
    } : {},
  )

  rendered = jsonencode(local.config)

  # Whether the node will find a key for what it must verify (the agent's
  # own rule: `node-bootstrap check-config`, src/config/checks.rs): a
  # signed source the agent config uses, with the keyring where this
  # module writes it, needs var.keyring.
  keyring_path_default = "/etc/kubernetes/installer/keyring.asc"
  # Whether a keyring is given, and what it holds (checked by preconditions
  # in outputs.tf; the keyring itself is sensitive: a secret key given by
  # mistake is never printed).
  has_keyring       = nonsensitive(var.keyring != null)
  keyring_is_secret = nonsensitive(var.keyring != null && can(regex("PRIVATE KEY", coalesce(var.keyring, "-"))))
  keyring_is_public = nonsensitive(var.keyring == null || can(regex("^\\s*-----BEGIN PGP PUBLIC KEY BLOCK-----", coalesce(var.keyring, "-"))))
  sources           = try(local.agent_config_in.sources, {})
  addon             = try(local.agent_config_in.addon, {})
  # A setting of the agent config, or its default when absent or null.
  upgrade            = coalesce(try(local.agent_config_in.agent.upgrade, null), "off")
  package_source     = coalesce(try(local.addon.package_source, null), "torcx-manifest")
  addon_enabled      = coalesce(try(local.addon.enabled, null), false)
  addon_unsigned     = coalesce(try(local.addon.allow_unsigned, null), false)
  addon_keyring      = coalesce(try(local.addon.keyring, null), local.keyring_path_default)
  sources_keyring    = coalesce(try(local.sources.keyring, null), local.keyring_path_default)
  allow_unsigned     = try(local.sources.allow_unsigned, null) == null ? [] : local.sources.allow_unsigned
  use_cluster_bucket = coalesce(try(local.sources.use_cluster_bucket, null), true)
  use_default        = try(local.sources.default_url, null) != null || coalesce(try(local.sources.use_default, null), false)
  searches_metadata = anytrue([
    local.kubelet_backend != "wrapper",
    local.addon_enabled && local.package_source == "metadata",
    local.upgrade != "off",
  ])
  # The locations searched whose unsigned metadata is not accepted.
  signed_locations = concat(
    try(local.sources.url, null) != null && !contains(local.allow_unsigned, "url") ? ["sources.url"] : [],
    local.use_cluster_bucket && try(local.agent_config_in.assets.s3, null) != null && !contains(local.allow_unsigned, "bucket") ? ["the cluster's bucket"] : [],
    local.use_default && !contains(local.allow_unsigned, "default") ? ["the default location"] : [],
  )
  needs_sources_keyring = local.searches_metadata && length(local.signed_locations) > 0 && local.sources_keyring == local.keyring_path_default
  needs_addon_keyring   = local.addon_enabled && local.package_source != "metadata" && !local.addon_unsigned && local.addon_keyring == local.keyring_path_default
}
