terraform {
  required_version = ">= 1.9.0"
  # No providers: rendered with built-in functions only, so this module
  # plans and applies without downloading anything.
}
