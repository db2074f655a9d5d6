# Today's Flatcar: workers that join an existing control plane (kubeadm's,
# or any that accepts bootstrap tokens) on Kubernetes 1.3x. Each worker starts
# with a bootstrap token only and earns its own client certificate; the agent
# runs containerd (the OS's, held to the series runtime-mappings.yaml lists)
# and the kubelet as a system extension from your signed mirror, chosen by the
# cluster's version: its defaults on every Flatcar that reads these configs,
# so config.json only names the mirror (docs/operators.md, "Today's Flatcar:
# the kubelet as a system extension" and "The control plane").
#
# `terraform apply` writes <ignition_dir>/<worker>.ign for each worker; all
# workers get the same config (a worker's config does not depend on its
# name), rendered once.

locals {
  cluster_ca = file(var.cluster_ca_path)
}

module "bootstrap_token" {
  source = "../../modules/bootstrap-token"

  # Sensitive, all three: a whole token pasted into id is refused without
  # being printed (the module checks the shapes by preconditions).
  token_id       = var.bootstrap_token.id
  token_secret   = var.bootstrap_token.secret
  expiration     = var.bootstrap_token.expiration
  api_server_url = var.api_server_url
  cluster_ca     = local.cluster_ca
}

module "worker" {
  source = "../../modules/ignition"

  role                 = "worker"
  agent_url            = var.agent_url
  agent_sha512         = var.agent_sha512
  agent_config         = file(var.agent_config_path)
  kubelet_image_tag    = replace(var.kubernetes_version, "+", "_")
  runtime_mappings     = file(var.runtime_mappings_path)
  keyring              = file(var.keyring_path)
  bootstrap_kubeconfig = module.bootstrap_token.kubeconfig
  ssh_user             = var.ssh_user
  ssh_authorized_keys  = var.ssh_authorized_keys
  ca_bundle            = var.ca_bundle_path != null ? file(var.ca_bundle_path) : null
  cluster_dns_ip       = var.cluster_dns_ip
  cluster_domain       = var.cluster_domain
  node_labels          = var.node_labels
  node_taints          = var.worker_taints
  kubelet_extra_args   = var.kubelet_extra_args
  follow               = var.follow

  depends_on = [module.bootstrap_token]
}

# Day two (var.follow): the follow lease and the least RBAC the workers'
# identities need, and the operator's ConfigMap; the follow_rbac and
# follow_config outputs, applied once to the cluster before the workers boot.
module "follow" {
  source = "../../modules/follow-rbac"
  count  = var.follow ? 1 : 0
}

# One file per worker, <ignition_dir>/<worker>.ign (mode 0600: it carries the
# bootstrap token), written when the config changes; removed with the worker.
resource "terraform_data" "ignition_file" {
  for_each = var.ignition_dir != null ? var.workers : toset([])

  triggers_replace = {
    sha512 = module.worker.sha512
    path   = "${abspath(var.ignition_dir)}/${each.key}.ign"
  }

  provisioner "local-exec" {
    command = "umask 077 && mkdir -p \"$(dirname \"$FILE\")\" && printf '%s' \"$CONFIG\" > \"$FILE.tmp\" && mv -f \"$FILE.tmp\" \"$FILE\""
    environment = {
      FILE   = self.triggers_replace.path
      CONFIG = module.worker.rendered
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
