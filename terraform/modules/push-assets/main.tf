# Push mode: copies the cluster assets to a node over SSH and moves them into
# place in one step (as Tectonic's metal platform did, made safe):
#
#   1. remote-exec: an empty, private staging dir in the SSH user's home;
#   2. file: the assets, plus SHA256SUMS (computed here from the local copy
#      and extra_files), the install script, and a script that writes
#      extra_files into the uploaded assets (run at once, as the SSH user);
#   3. remote-exec: install-assets.sh (through sudo unless user is root)
#      verifies the upload, copies it next to target_dir, keeps the .done
#      markers of steps that already ran, and renames it into place.
#
# terraform_data is replaced (and the push runs again) only when the assets'
# contents, the node or the target change, so re-applying unchanged assets
# changes nothing on the node.

locals {
  assets_dir = abspath(pathexpand(var.assets_dir))
  extra      = sort(nonsensitive(keys(var.extra_files)))
  files      = sort(concat(tolist(fileset(local.assets_dir, "**")), local.extra))
  # The manifest names extra_files' hashes: only its own hash leaves the
  # module (a SHA-256 of SHA-256s reveals nothing of a secret's contents).
  manifest = join("", [
    for f in local.files : contains(local.extra, f)
    ? "${sha256(var.extra_files[f])}  ${f}\n"
    : "${filesha256("${local.assets_dir}/${f}")}  ${f}\n"
  ])
  # Writes each of extra_files under the directory given as $1, mode 0600
  # (the install script checks them against the manifest with the rest).
  extra_script = join("", concat(
    ["#!/bin/sh\n# Written by terraform/modules/push-assets: extra_files.\nset -eu\numask 077\n"],
    [for f in local.extra : join("", [
      "mkdir -p \"$1/${dirname(f)}\"\n",
      "base64 -d > \"$1/${f}\" <<'NODE_BOOTSTRAP_EOF'\n",
      base64encode(var.extra_files[f]),
      "\nNODE_BOOTSTRAP_EOF\n",
    ])],
  ))

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
    assets_sha256 = nonsensitive(sha256(local.manifest))
    host          = var.host
    port          = var.port
    target_dir    = var.target_dir
    marker        = var.complete_marker
  }

  input = {
    assets_sha256 = nonsensitive(sha256(local.manifest))
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

  provisioner "file" {
    content     = local.extra_script
    destination = "${local.staging}/extra-files.sh"
  }

  provisioner "remote-exec" {
    inline = [
      "set -e",
      "/bin/sh '${local.staging}/extra-files.sh' '${local.staging}/assets'",
      "rm -f '${local.staging}/extra-files.sh'",
      local.install,
    ]
  }
}
