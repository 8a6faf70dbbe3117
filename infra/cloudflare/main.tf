# The managed alternative to waitroom-proxy: one Cloudflare waiting room per room of drop.toml
# (Cloudflare's own model: many rooms per zone, each matched by host and path), and the zone-wide
# waiting-room settings. Each room is the module in room/.

module "room" {
  source   = "./room"
  for_each = var.rooms

  zone_id       = var.zone_id
  advanced_plan = var.advanced_plan
  room_name     = each.key

  description               = each.value.description
  host                      = each.value.host
  path                      = each.value.path
  total_active_users        = each.value.total_active_users
  new_users_per_minute      = each.value.new_users_per_minute
  session_duration          = each.value.session_duration
  disable_session_renewal   = each.value.disable_session_renewal
  queueing_method           = each.value.queueing_method
  queueing_status_code      = each.value.queueing_status_code
  queue_all                 = each.value.queue_all
  suspended                 = each.value.suspended
  cookie_suffix             = each.value.cookie_suffix
  cookie_samesite           = each.value.cookie_samesite
  cookie_secure             = each.value.cookie_secure
  default_template_language = each.value.default_template_language
  enabled_origin_commands   = each.value.enabled_origin_commands
  additional_routes         = each.value.additional_routes
  bypass_rules              = each.value.bypass_rules
  events                    = each.value.events
  turnstile_mode            = each.value.turnstile_mode
  turnstile_action          = each.value.turnstile_action
}

# Zone-wide: applies to every waiting room of the zone.
resource "cloudflare_waiting_room_settings" "zone" {
  zone_id                      = var.zone_id
  search_engine_crawler_bypass = var.search_engine_crawler_bypass
}
