# Bare metal on today's Flatcar: a bootkube master, further masters and
# workers, each with an Ignition config written to <ignition_dir>/<node>.ign
# for your PXE / matchbox setup to serve, and the cluster assets pushed over
# SSH to the bootkube master once it is up. The templates beside this file
# (config.json, runtime-mappings.yaml) run Kubernetes 1.30 to 1.33 on
# containerd (the OS's, or a system extension of a listed series from your
# mirror) with the kubelet as a system extension from your signed mirror:
# the agent's defaults on every Flatcar that reads these configs (3185.0.0
# and newer; docs/operators.md, "Today's Flatcar: the kubelet as a system
# extension"). Two steps (docs/operators.md, "Push mode"): `terraform apply`
# renders and writes the configs and pushes nothing; once the nodes boot
# from them, `terraform apply -var push_assets=true` pushes.
#
# tectonic.tfvars.example, with config.tectonic.json and
# runtime-mappings.tectonic.yaml, is the seed's Tectonic flow (Kubernetes
# 1.9 on docker through torcx, kubelet-wrapper): kept as this repository's
# tests run it on simulated Container Linux nodes. No released OS runs it
# from these configs: releases with kubelet-wrapper (before 2857.0.0) read
# only Ignition spec 2.x.

locals {
  agent_config = var.agent_config_path != null ? file(var.agent_config_path) : "{}"

  kubeconfig       = file(var.kubeconfig_path)
  runtime_mappings = file(var.runtime_mappings_path)
  keyring          = var.keyring_path != null ? file(var.keyring_path) : null
  ca_bundle        = var.ca_bundle_path != null ? file(var.ca_bundle_path) : null
  bootstrap        = nonsensitive(var.bootstrap_token != null)

  # A node's config depends only on its role: each role is rendered once,
  # and every node of it gets that config.
  configs = merge(
    { (var.bootkube_master.name) = module.bootkube_master.rendered },
    { for n in var.masters : n => module.master[0].rendered },
    { for n in var.workers : n => module.worker[0].rendered },
  )
  enabled_units = merge(
    { (var.bootkube_master.name) = module.bootkube_master.enabled_units },
    { for n in var.masters : n => module.master[0].enabled_units },
    { for n in var.workers : n => module.worker[0].enabled_units },
  )
}

# Workers with a bootstrap token (var.bootstrap_token): their bootstrap
# kubeconfig names the API server and CA of the shared kubeconfig's first
# cluster.
module "bootstrap_token" {
  source = "../../modules/bootstrap-token"
  count  = local.bootstrap ? 1 : 0

  # Sensitive, all three: a whole token pasted into id is refused without
  # being printed (the module checks the shapes by preconditions).
  token_id       = var.bootstrap_token.id
  token_secret   = var.bootstrap_token.secret
  expiration     = var.bootstrap_token.expiration
  api_server_url = yamldecode(local.kubeconfig).clusters[0].cluster.server
  cluster_ca     = base64decode(yamldecode(local.kubeconfig).clusters[0].cluster["certificate-authority-data"])
}

# The bootkube master first: the other roles' configs wait for it
# (depends_on below), so a mistake in the inputs they share is reported once,
# here.
module "bootkube_master" {
  source = "../../modules/ignition"

  role                = "bootkube-master"
  assets_mode         = "push"
  agent_url           = var.agent_url
  agent_sha512        = var.agent_sha512
  agent_config        = local.agent_config
  kubelet_image_url   = var.kubelet_image_url
  kubelet_image_tag   = var.kubelet_image_tag
  runtime_mappings    = local.runtime_mappings
  keyring             = local.keyring
  kubeconfig          = local.kubeconfig
  ssh_user            = var.ssh_user
  ssh_authorized_keys = var.ssh_authorized_keys
  ca_bundle           = local.ca_bundle
  cluster_dns_ip      = var.cluster_dns_ip
  cluster_domain      = var.cluster_domain
  node_labels         = var.node_labels
  node_taints         = var.master_taints
  kubelet_extra_args  = var.kubelet_extra_args
  follow              = var.follow
}

module "master" {
  source = "../../modules/ignition"
  count  = length(var.masters) > 0 ? 1 : 0

  role                = "master"
  assets_mode         = "push"
  agent_url           = var.agent_url
  agent_sha512        = var.agent_sha512
  agent_config        = local.agent_config
  kubelet_image_url   = var.kubelet_image_url
  kubelet_image_tag   = var.kubelet_image_tag
  runtime_mappings    = local.runtime_mappings
  keyring             = local.keyring
  kubeconfig          = local.kubeconfig
  ssh_user            = var.ssh_user
  ssh_authorized_keys = var.ssh_authorized_keys
  ca_bundle           = local.ca_bundle
  cluster_dns_ip      = var.cluster_dns_ip
  cluster_domain      = var.cluster_domain
  node_labels         = var.node_labels
  node_taints         = var.master_taints
  kubelet_extra_args  = var.kubelet_extra_args
  follow              = var.follow

  depends_on = [module.bootkube_master]
}

module "worker" {
  source = "../../modules/ignition"
  count  = length(var.workers) > 0 ? 1 : 0

  role              = "worker"
  assets_mode       = "push"
  agent_url         = var.agent_url
  agent_sha512      = var.agent_sha512
  agent_config      = local.agent_config
  kubelet_image_url = var.kubelet_image_url
  kubelet_image_tag = var.kubelet_image_tag
  runtime_mappings  = local.runtime_mappings
  keyring           = local.keyring
  # With a bootstrap token a worker holds it only (no client credential).
  kubeconfig           = local.bootstrap ? null : local.kubeconfig
  bootstrap_kubeconfig = local.bootstrap ? module.bootstrap_token[0].kubeconfig : null
  ssh_user             = var.ssh_user
  ssh_authorized_keys  = var.ssh_authorized_keys
  ca_bundle            = local.ca_bundle
  cluster_dns_ip       = var.cluster_dns_ip
  cluster_domain       = var.cluster_domain
  node_labels          = var.node_labels
  node_taints          = var.worker_taints
  kubelet_extra_args   = var.kubelet_extra_args
  follow               = var.follow

  depends_on = [module.bootkube_master, module.bootstrap_token]
}

# Day two (var.follow): the follow lease and the least RBAC the nodes'
# identities need, and the operator's ConfigMap; the follow_rbac and
# follow_config outputs, applied once to the cluster (or put in the assets'
# manifests/) before the nodes follow.
module "follow" {
  source = "../../modules/follow-rbac"
  count  = var.follow ? 1 : 0
}

# One file per node, <ignition_dir>/<node>.ign (mode 0600: it carries the
# node's credential), written when its config changes; removed with the node.
resource "terraform_data" "ignition_file" {
  for_each = var.ignition_dir != null ? toset(keys(local.configs)) : toset([])

  triggers_replace = {
    sha512 = sha512(local.configs[each.key])
    path   = "${abspath(var.ignition_dir)}/${each.key}.ign"
  }

  provisioner "local-exec" {
    command = "umask 077 && mkdir -p \"$(dirname \"$FILE\")\" && printf '%s' \"$CONFIG\" > \"$FILE.tmp\" && mv -f \"$FILE.tmp\" \"$FILE\""
    environment = {
      FILE   = self.triggers_replace.path
      CONFIG = local.configs[each.key]
    }
  }

  provisioner "local-exec" {
    when    = destroy
    command = "rm -f \"$FILE\""
    environment = {
      FILE = self.triggers_replace.path
    }
  }
}

# The push, once the nodes boot from their configs (push_assets = true).
module "assets" {
  source = "../../modules/push-assets"
  count  = var.push_assets ? 1 : 0

  host        = var.bootkube_master.host
  port        = var.bootkube_master.port
  host_key    = var.bootkube_master.host_key
  user        = var.ssh_user
  private_key = var.ssh_private_key_path != null ? file(pathexpand(var.ssh_private_key_path)) : null
  ssh_timeout = var.ssh_timeout
  assets_dir  = var.assets_dir
  # With a bootstrap token, its Secret and the RBAC for kubelet TLS
  # bootstrapping go with the assets: tectonic applies manifests/ before
  # the first worker asks for its certificate.
  extra_files = local.bootstrap ? {
    for name, yaml in module.bootstrap_token[0].manifests : "manifests/${name}" => yaml
  } : tomap({})

  # The configs are on disk before the push starts waiting for the master.
  depends_on = [terraform_data.ignition_file]
}
