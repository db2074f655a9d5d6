# Bare metal: Ignition configs for every node (serve them with your PXE /
# matchbox setup), and the cluster assets pushed over SSH to the bootkube
# master once it is up, as Tectonic's metal platform did.

locals {
  agent_config = var.agent_config_path != null ? file(var.agent_config_path) : "{}"

  node_roles = merge(
    { (var.bootkube_master.name) = "bootkube-master" },
    { for n in var.masters : n => "master" },
    { for n in var.workers : n => "worker" },
  )

  # Which nodes start with the bootstrap token: the workers, if there is one.
  bootstrap_worker = { for n, r in local.node_roles : n => r == "worker" && nonsensitive(var.bootstrap_token != null) }
}

# Workers with a bootstrap token (var.bootstrap_token): their bootstrap
# kubeconfig names the API server and CA of the shared kubeconfig's first
# cluster.
module "bootstrap_token" {
  source = "../../modules/bootstrap-token"
  count  = nonsensitive(var.bootstrap_token != null) ? 1 : 0

  token_id       = nonsensitive(var.bootstrap_token.id)
  token_secret   = var.bootstrap_token.secret
  expiration     = nonsensitive(var.bootstrap_token.expiration)
  api_server_url = yamldecode(file(var.kubeconfig_path)).clusters[0].cluster.server
  cluster_ca     = base64decode(yamldecode(file(var.kubeconfig_path)).clusters[0].cluster["certificate-authority-data"])
}

module "ignition" {
  source   = "../../modules/ignition"
  for_each = local.node_roles

  role              = each.value
  assets_mode       = "push"
  agent_url         = var.agent_url
  agent_sha512      = var.agent_sha512
  agent_config      = local.agent_config
  kubelet_image_url = var.kubelet_image_url
  kubelet_image_tag = var.kubelet_image_tag
  runtime_mappings  = file(var.runtime_mappings_path)
  keyring           = var.keyring_path != null ? file(var.keyring_path) : null
  kubeconfig        = local.bootstrap_worker[each.key] ? null : file(var.kubeconfig_path)
  # A worker with a bootstrap token holds it only (no client credential).
  bootstrap_kubeconfig = local.bootstrap_worker[each.key] ? module.bootstrap_token[0].kubeconfig : null
  ssh_user             = var.ssh_user
  ssh_authorized_keys  = var.ssh_authorized_keys
  ca_bundle            = var.ca_bundle_path != null ? file(var.ca_bundle_path) : null
}

module "assets" {
  source = "../../modules/push-assets"

  host        = var.bootkube_master.host
  port        = var.bootkube_master.port
  host_key    = var.bootkube_master.host_key
  user        = var.ssh_user
  private_key = var.ssh_private_key_path != null ? file(pathexpand(var.ssh_private_key_path)) : null
  ssh_timeout = var.ssh_timeout
  assets_dir  = var.assets_dir
}
