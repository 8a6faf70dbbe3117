# The managed alternative to waitroom-proxy: the same room as Cloudflare Waiting Room.
# tests/terraform.rs parses these files and checks them against each other and against
# `waitroom-proxy export-terraform`; where the terraform CLI is installed it also runs the
# variables' validations on exported files (the provider itself cannot be fetched there).

terraform {
  # Validations that compare two variables (advanced_plan with what it unlocks, the cookie's
  # SameSite with its Secure) need 1.9.
  required_version = ">= 1.9.0"

  required_providers {
    cloudflare = {
      source  = "cloudflare/cloudflare"
      version = "~> 5"
    }
  }
}

# The API token comes from CLOUDFLARE_API_TOKEN (permission: Zone > Waiting Rooms > Edit).
provider "cloudflare" {}
