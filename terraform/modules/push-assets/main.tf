# Push mode: copies the cluster assets to a node over SSH and moves them into
# place in one step (as Tectonic's metal platform did, made safe):
#
#   1. remote-exec: an empty, private staging dir in the SSH user's home;
#   2. file: the assets, plus SHA256SUMS (computed here from the local copy)
#      and the install script;
#   3. remote-exec: install-assets.sh (through sudo unless user is root)
#      verifies the upload, copies it next to target_dir, keeps the .done
#      markers of steps that already ran, and renames it into place.
#
# terraform_data is replaced (and the push runs again) only when the assets'
# contents, the node or the target change, so re-applying unchanged assets
# changes nothing on the node.

locals {
  assets_dir = abspath(pathexpand(var.assets_dir))
  files      = sort(fileset(local.assets_dir, "**"))
  manifest   = join("", [for f in local.files : "${filesha256("${local.assets_dir}/${f}")}  ${f}\n"])

  staging = var.staging_dir != null ? var.staging_dir : (
    var.user == "root" ? "/root/.node-bootstrap-push" : "/home/${var.user}/.node-bootstrap-push"
  )
  sudo = var.user == "root" ? "" : "sudo -n "

  install = join(" ", [
    "${local.sudo}/bin/sh '${local.staging}/install-assets.sh'",
    "'${local.staging}'",
    "'${var.target_dir}'",
    var.complete_marker != null ? "'${var.complete_marker}'" : "",
  ])
}

resource "terraform_data" "assets" {
  triggers_replace = {
    assets_sha256 = sha256(local.manifest)
    host          = var.host
    port          = var.port
    target_dir    = var.target_dir
    marker        = var.complete_marker
  }

  input = {
    assets_sha256 = sha256(local.manifest)
    files         = length(local.files)
  }

  connection {
    type        = "ssh"
    host        = var.host
    port        = var.port
    user        = var.user
    private_key = var.private_key
    agent       = var.private_key == null
    host_key    = var.host_key
    timeout     = var.ssh_timeout
  }

  provisioner "remote-exec" {
    inline = [
      "set -e",
      "rm -rf '${local.staging}'",
      "mkdir -p -m 0700 '${local.staging}/assets'",
    ]
  }

  provisioner "file" {
    source      = "${local.assets_dir}/"
    destination = "${local.staging}/assets"
  }

  provisioner "file" {
    content     = local.manifest
    destination = "${local.staging}/SHA256SUMS"
  }

  provisioner "file" {
    source      = "${path.module}/files/install-assets.sh"
    destination = "${local.staging}/install-assets.sh"
  }

  provisioner "remote-exec" {
    inline = [local.install]
  }
}
