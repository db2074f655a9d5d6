# Pull mode: a private, encrypted bucket with the cluster's asset bundle (and
# optionally the nodes' Ignition configs), readable only by the nodes' roles,
# each role only the objects it needs.

data "aws_partition" "current" {}
data "aws_region" "current" {}

resource "aws_s3_bucket" "assets" {
  bucket        = var.bucket_name
  bucket_prefix = var.bucket_name == null ? var.bucket_prefix : null
  force_destroy = var.force_destroy
  tags          = var.tags
}

# Private: no ACLs, no public policies, whatever anyone adds later.
resource "aws_s3_bucket_public_access_block" "assets" {
  bucket                  = aws_s3_bucket.assets.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "assets" {
  bucket = aws_s3_bucket.assets.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

# Encrypted at rest by default.
resource "aws_s3_bucket_server_side_encryption_configuration" "assets" {
  bucket = aws_s3_bucket.assets.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = var.kms_key_arn != null ? "aws:kms" : "AES256"
      kms_master_key_id = var.kms_key_arn
    }
    bucket_key_enabled = var.kms_key_arn != null
  }
}

# Old bundles stay recoverable.
resource "aws_s3_bucket_versioning" "assets" {
  bucket = aws_s3_bucket.assets.id
  versioning_configuration {
    status = "Enabled"
  }
}

# TLS only, for everyone.
data "aws_iam_policy_document" "bucket" {
  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.assets.arn, "${aws_s3_bucket.assets.arn}/*"]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "assets" {
  bucket = aws_s3_bucket.assets.id
  policy = data.aws_iam_policy_document.bucket.json
  # A policy put before the public access block could be rejected.
  depends_on = [aws_s3_bucket_public_access_block.assets]
}

resource "aws_s3_object" "bundle" {
  bucket             = aws_s3_bucket.assets.id
  key                = var.bundle_key
  source             = var.bundle_path
  source_hash        = filesha256(var.bundle_path)
  content_type       = "application/gzip"
  checksum_algorithm = "SHA256"
  # Stored under the node's own checksum name too, for agents that verify
  # against object metadata.
  metadata = {
    sha256 = filesha256(var.bundle_path)
  }

  depends_on = [aws_s3_bucket_server_side_encryption_configuration.assets]
}

resource "aws_s3_object" "ignition" {
  # Keys are not secret; the configs are.
  for_each = toset(nonsensitive(keys(var.ignition_configs)))

  bucket             = aws_s3_bucket.assets.id
  key                = "ignition/${each.key}.ign"
  content            = var.ignition_configs[each.key].content
  content_type       = "application/json"
  checksum_algorithm = "SHA256"

  depends_on = [aws_s3_bucket_server_side_encryption_configuration.assets]
}

locals {
  bundle_arn = "${aws_s3_bucket.assets.arn}/${var.bundle_key}"

  reader_roles = toset(nonsensitive(distinct(concat(
    var.bundle_reader_role_names,
    flatten([for c in values(var.ignition_configs) : c.reader_role_names]),
  ))))

  # Role name => the object keys it may read.
  role_keys = {
    for r in local.reader_roles : r => concat(
      contains(var.bundle_reader_role_names, r) ? [var.bundle_key] : [],
      nonsensitive([for name, c in var.ignition_configs : "ignition/${name}.ign" if contains(c.reader_role_names, r)]),
    )
  }
}

# Least privilege: GetObject on exactly the objects a role needs (and
# kms:Decrypt through S3 with a KMS key), nothing else. Without ListBucket S3
# answers a missing object with 403 rather than 404, so to a node a missing
# bundle looks like a denied one; check the bundle_url output first.
data "aws_iam_policy_document" "read" {
  for_each = local.role_keys

  statement {
    sid       = "ReadNodeObjects"
    actions   = ["s3:GetObject"]
    resources = [for k in each.value : "${aws_s3_bucket.assets.arn}/${k}"]
  }

  dynamic "statement" {
    for_each = var.kms_key_arn != null ? [var.kms_key_arn] : []
    content {
      sid       = "DecryptNodeObjects"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["s3.${data.aws_region.current.id}.amazonaws.com"]
      }
    }
  }
}

resource "aws_iam_role_policy" "read" {
  for_each = local.role_keys

  name   = "node-bootstrap-read-${aws_s3_bucket.assets.id}"
  role   = each.key
  policy = data.aws_iam_policy_document.read[each.key].json
}
