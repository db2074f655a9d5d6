terraform {
  # 1.9: validation conditions may refer to other variables.
  required_version = ">= 1.9.0"
  # No providers: terraform_data and the file / remote-exec provisioners are
  # built in, so this module plans and applies without downloading anything.
}
