terraform {
  required_version = ">= 1.9.0"
  # No providers: Ignition configs are rendered with built-in functions, the
  # push uses the built-in terraform_data with SSH provisioners.
}
