terraform {
  # 1.9: validation conditions may refer to other variables; plantimestamp()
  # and timecmp() (1.5) check the expiration at plan time.
  required_version = ">= 1.9.0"
  # No providers: everything is rendered with built-in functions only, so
  # this module plans and applies without downloading anything.
}
