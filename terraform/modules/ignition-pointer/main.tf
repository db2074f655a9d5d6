# A small Ignition config (spec 3.3.0) that replaces itself with the full
# config stored at config_url, verified by its SHA-512. Cloud user data is
# small (16 KiB on AWS) and readable from the instance metadata service; the
# full config carries the kubeconfig, so it lives in a private bucket that
# only the node's role can read (Tectonic did the same on AWS).

locals {
  rendered = jsonencode({
    ignition = merge(
      {
        version = "3.3.0"
        config = {
          replace = {
            source       = var.config_url
            verification = { hash = "sha512-${var.config_sha512}" }
          }
        }
      },
      var.ca_bundle != null ? {
        security = { tls = { certificateAuthorities = [{ source = "data:;base64,${base64encode(var.ca_bundle)}" }] } }
      } : {},
    )
  })
}
