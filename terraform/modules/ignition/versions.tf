terraform {
  # 1.9: validation conditions may refer to other variables.
  required_version = ">= 1.9.0"
  # No providers: the config is rendered with built-in functions only, so
  # this module plans and applies without downloading anything.
}
