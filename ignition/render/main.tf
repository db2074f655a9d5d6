# Renders the example Ignition configs checked in under ignition/examples/,
# from the modules in terraform/modules and the inputs in ./inputs. No
# providers: scripts/render-ignition.sh applies it and writes the files, and
# tests/delivery/delivery_ignition.rs fails if the checked-in files are stale.
#
# The inputs are examples (a made-up mirror, binary hash, CA, token); real
# clusters pass their own through the same modules. The nodes are today's
# Flatcar: Kubernetes 1.31 on containerd, the kubelet as a system extension
# from the mirror config.json names (the agent's defaults), its metadata
# signed by keyring.asc. (inputs/runtime-mappings.yaml, the seed's docker
# mappings of Kubernetes 1.8 to 1.10, is the VM tier's stand-in cluster's.)

terraform {
  required_version = ">= 1.9.0"
}

locals {
  inputs = "${path.module}/inputs"

  common = {
    # A private mirror serving the agent binary (see docs/operators.md).
    agent_url    = "https://mirror.example.com/node-bootstrap/v0.1.0/x86_64/node-bootstrap"
    agent_sha512 = sha512("example: the SHA-512 of the node-bootstrap binary at agent_url")

    agent_config        = file("${local.inputs}/config.json")
    kubelet_image_url   = "quay.io/coreos/hyperkube"
    kubelet_image_tag   = "v1.31.4"
    runtime_mappings    = file("${local.inputs}/runtime-mappings-flatcar.yaml")
    keyring             = file("${local.inputs}/keyring.asc")
    kubeconfig          = file("${local.inputs}/kubeconfig")
    ssh_authorized_keys = [file("${local.inputs}/operator.pub")]
    ca_bundle           = file("${local.inputs}/mirror-ca.pem")
  }
}

# Workers start with a bootstrap token only (the kubelet earns its own client
# certificate); the masters keep the shared kubeconfig. The token is kubeadm's
# documentation example: make your own (docs/operators.md, "Node credentials:
# bootstrap tokens or client certificates").
module "bootstrap_token" {
  source = "../../terraform/modules/bootstrap-token"

  token_id     = "07401b"
  token_secret = "f395accd246ae52d"
  # The worker's config does not depend on it (only the token's Secret does).
  expiration     = timeadd(plantimestamp(), "24h")
  api_server_url = "https://api.example-cluster.example.com:443"
  # The cluster CA: the example kubeconfig's.
  cluster_ca = base64decode(yamldecode(local.common.kubeconfig).clusters[0].cluster["certificate-authority-data"])
}

module "worker" {
  source = "../../terraform/modules/ignition"

  role                 = "worker"
  agent_url            = local.common.agent_url
  agent_sha512         = local.common.agent_sha512
  agent_config         = local.common.agent_config
  kubelet_image_url    = local.common.kubelet_image_url
  kubelet_image_tag    = local.common.kubelet_image_tag
  runtime_mappings     = local.common.runtime_mappings
  keyring              = local.common.keyring
  bootstrap_kubeconfig = module.bootstrap_token.kubeconfig
  ssh_authorized_keys  = local.common.ssh_authorized_keys
  ca_bundle            = local.common.ca_bundle
}

module "master" {
  source = "../../terraform/modules/ignition"

  role                = "master"
  agent_url           = local.common.agent_url
  agent_sha512        = local.common.agent_sha512
  agent_config        = local.common.agent_config
  kubelet_image_url   = local.common.kubelet_image_url
  kubelet_image_tag   = local.common.kubelet_image_tag
  runtime_mappings    = local.common.runtime_mappings
  keyring             = local.common.keyring
  kubeconfig          = local.common.kubeconfig
  ssh_authorized_keys = local.common.ssh_authorized_keys
  ca_bundle           = local.common.ca_bundle
}

module "bootkube_master" {
  source = "../../terraform/modules/ignition"

  role                = "bootkube-master"
  assets_mode         = "push"
  agent_url           = local.common.agent_url
  agent_sha512        = local.common.agent_sha512
  agent_config        = local.common.agent_config
  kubelet_image_url   = local.common.kubelet_image_url
  kubelet_image_tag   = local.common.kubelet_image_tag
  runtime_mappings    = local.common.runtime_mappings
  keyring             = local.common.keyring
  kubeconfig          = local.common.kubeconfig
  ssh_authorized_keys = local.common.ssh_authorized_keys
  ca_bundle           = local.common.ca_bundle
}

# Pull mode (AWS): the agent downloads the asset bundle from S3; the node's
# user data is a pointer to this config, stored in the same private bucket.
module "bootkube_master_pull" {
  source = "../../terraform/modules/ignition"

  role                = "bootkube-master"
  assets_mode         = "pull"
  agent_url           = local.common.agent_url
  agent_sha512        = local.common.agent_sha512
  agent_config        = file("${local.inputs}/config-pull.json")
  kubelet_image_url   = local.common.kubelet_image_url
  kubelet_image_tag   = local.common.kubelet_image_tag
  runtime_mappings    = local.common.runtime_mappings
  keyring             = local.common.keyring
  kubeconfig          = local.common.kubeconfig
  ssh_authorized_keys = local.common.ssh_authorized_keys
  ca_bundle           = local.common.ca_bundle
}

module "bootkube_master_pull_pointer" {
  source = "../../terraform/modules/ignition-pointer"

  config_url    = "s3://example-cluster-assets/ignition/bootkube-master.ign"
  config_sha512 = module.bootkube_master_pull.sha512
}

output "configs" {
  description = "File name under ignition/examples/ => rendered Ignition config."
  sensitive   = true
  value = {
    "worker.ign"                       = module.worker.rendered
    "master.ign"                       = module.master.rendered
    "bootkube-master.ign"              = module.bootkube_master.rendered
    "bootkube-master-pull.ign"         = module.bootkube_master_pull.rendered
    "bootkube-master-pull-pointer.ign" = module.bootkube_master_pull_pointer.rendered
  }
}
