# The managed alternative to waitroom-proxy: the same room as Cloudflare Waiting Room.
# Terraform and the provider are not run by this repository's tests (they cannot be installed
# there); tests/terraform.rs parses these files and checks them against each other.

terraform {
  # optional() object attributes with defaults need 1.3; 1.5 is the oldest line still common.
  required_version = ">= 1.5.0"

  required_providers {
    cloudflare = {
      source  = "cloudflare/cloudflare"
      version = "~> 5"
    }
  }
}

# The API token comes from CLOUDFLARE_API_TOKEN (permission: Zone > Waiting Rooms > Edit).
provider "cloudflare" {}
