# AWS, pull mode: the asset bundle and every node's Ignition config live in a
# private, encrypted bucket; the bootkube master's role may read the bundle
# and its own config, a worker's role only the workers' config. A node's user
# data is a small Ignition pointer to its config (verified by SHA-512).
# The nodes are today's Flatcar (a stable AMI): containerd and the kubelet
# as a system extension from your signed mirror (the agent's defaults;
# terraform.tfvars.example's agent_config names the mirror), Kubernetes 1.30
# to 1.33 as runtime-mappings.yaml beside this file lists them.

data "aws_partition" "current" {}

locals {
  ec2_principal = "ec2.${data.aws_partition.current.dns_suffix}"
  roles         = toset(["master", "worker"])

  common = {
    agent_url           = var.agent_url
    agent_sha512        = var.agent_sha512
    kubelet_image_url   = var.kubelet_image_url
    kubelet_image_tag   = var.kubelet_image_tag
    runtime_mappings    = file(var.runtime_mappings_path)
    keyring             = var.keyring_path != null ? file(var.keyring_path) : null
    kubeconfig          = file(var.kubeconfig_path)
    ssh_authorized_keys = var.ssh_authorized_keys
  }

  bundle_key = "assets/assets.tar.gz"

  # Workers start with the bootstrap token, if there is one.
  bootstrap = nonsensitive(var.bootstrap_token != null)

  # The agent's S3 settings for the pull (names as in the agent's "assets"
  # config section).
  master_agent_config = merge(var.agent_config, {
    assets = merge(try(var.agent_config.assets, {}), {
      mode = "pull"
      s3 = {
        bucket          = module.assets.bucket
        key             = local.bundle_key
        region          = var.region
        checksum_sha256 = filesha256(var.assets_bundle_path)
      }
    })
  })
}

# --- IAM: one role per kind of node -----------------------------------------

data "aws_iam_policy_document" "assume_ec2" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = [local.ec2_principal]
    }
  }
}

resource "aws_iam_role" "node" {
  for_each           = local.roles
  name               = "${var.cluster_name}-${each.key}"
  assume_role_policy = data.aws_iam_policy_document.assume_ec2.json
}

resource "aws_iam_instance_profile" "node" {
  for_each = local.roles
  name     = "${var.cluster_name}-${each.key}"
  role     = aws_iam_role.node[each.key].name
}

# --- Ignition configs (provider-free module) --------------------------------

module "ignition_master" {
  source = "../../modules/ignition"

  role                = "bootkube-master"
  assets_mode         = "pull"
  agent_config        = jsonencode(local.master_agent_config)
  agent_url           = local.common.agent_url
  agent_sha512        = local.common.agent_sha512
  kubelet_image_url   = local.common.kubelet_image_url
  kubelet_image_tag   = local.common.kubelet_image_tag
  runtime_mappings    = local.common.runtime_mappings
  keyring             = local.common.keyring
  kubeconfig          = local.common.kubeconfig
  ssh_authorized_keys = local.common.ssh_authorized_keys
  follow              = var.follow
}

module "ignition_worker" {
  source = "../../modules/ignition"

  role              = "worker"
  agent_config      = jsonencode(var.agent_config)
  agent_url         = local.common.agent_url
  agent_sha512      = local.common.agent_sha512
  kubelet_image_url = local.common.kubelet_image_url
  kubelet_image_tag = local.common.kubelet_image_tag
  runtime_mappings  = local.common.runtime_mappings
  keyring           = local.common.keyring
  kubeconfig        = local.bootstrap ? null : local.common.kubeconfig
  # With a bootstrap token the workers hold it only (no client credential).
  bootstrap_kubeconfig = local.bootstrap ? module.bootstrap_token[0].kubeconfig : null
  ssh_authorized_keys  = local.common.ssh_authorized_keys
  follow               = var.follow
}

# Day two (var.follow): the follow lease, the least RBAC the nodes'
# identities need, and the operator's ConfigMap (the follow_rbac and
# follow_config outputs), applied once to the cluster before nodes follow.
module "follow" {
  source = "../../modules/follow-rbac"
  count  = var.follow ? 1 : 0
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
  api_server_url = yamldecode(file(var.kubeconfig_path)).clusters[0].cluster.server
  cluster_ca     = base64decode(yamldecode(file(var.kubeconfig_path)).clusters[0].cluster["certificate-authority-data"])
}

# --- The bucket --------------------------------------------------------------

module "assets" {
  source = "../../modules/s3-assets"

  bucket_prefix            = "${var.cluster_name}-assets-"
  bundle_path              = var.assets_bundle_path
  bundle_key               = local.bundle_key
  bundle_reader_role_names = [aws_iam_role.node["master"].name]
  kms_key_arn              = var.kms_key_arn
  ignition_configs = {
    bootkube-master = {
      content           = module.ignition_master.rendered
      reader_role_names = [aws_iam_role.node["master"].name]
    }
    worker = {
      content           = module.ignition_worker.rendered
      reader_role_names = [aws_iam_role.node["worker"].name]
    }
  }
  tags = { cluster = var.cluster_name }
}

module "pointer_master" {
  source = "../../modules/ignition-pointer"

  config_url    = module.assets.ignition_urls["bootkube-master"]
  config_sha512 = module.ignition_master.sha512
}

module "pointer_worker" {
  source = "../../modules/ignition-pointer"

  config_url    = module.assets.ignition_urls["worker"]
  config_sha512 = module.ignition_worker.sha512
}

# --- Instances ---------------------------------------------------------------

resource "aws_instance" "bootkube_master" {
  ami                    = var.ami_id
  instance_type          = var.master_instance_type
  subnet_id              = var.subnet_id
  vpc_security_group_ids = var.security_group_ids
  iam_instance_profile   = aws_iam_instance_profile.node["master"].name
  user_data              = module.pointer_master.rendered

  metadata_options {
    http_tokens = "required"
  }

  tags = { Name = "${var.cluster_name}-master-0", cluster = var.cluster_name }

  # A node runs its config once, at first boot: a new one (a new agent pin,
  # a new bootstrap token) is for instances made from now on, not a reason
  # to stop or replace running ones (docs/operators.md).
  lifecycle {
    ignore_changes = [user_data]
  }
}

resource "aws_instance" "worker" {
  count                  = var.worker_count
  ami                    = var.ami_id
  instance_type          = var.worker_instance_type
  subnet_id              = var.subnet_id
  vpc_security_group_ids = var.security_group_ids
  iam_instance_profile   = aws_iam_instance_profile.node["worker"].name
  user_data              = module.pointer_worker.rendered

  metadata_options {
    http_tokens = "required"
  }

  tags = { Name = "${var.cluster_name}-worker-${count.index}", cluster = var.cluster_name }

  # A node runs its config once, at first boot: a new one (a new agent pin,
  # a new bootstrap token) is for instances made from now on, not a reason
  # to stop or replace running ones (docs/operators.md).
  lifecycle {
    ignore_changes = [user_data]
  }
}
