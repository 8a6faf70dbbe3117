# One room, its scheduled drops and its bypass rules: ../main.tf calls this module once per room
# of drop.toml. custom_page_html is ../waiting.html: the same Mustache page waitroom-proxy
# serves with `[page] template`, so visitors see one page whichever variant runs.
#
# What only the Waiting Room Advanced plan allows is sent only with advanced_plan = true
# (variables.tf refuses the values that need it otherwise): without it the room serves
# Cloudflare's own page in default_template_language, HTML only, fifo, sliding sessions.

resource "cloudflare_waiting_room" "room" {
  zone_id     = var.zone_id
  name        = var.room_name
  description = var.description
  host        = var.host
  path        = var.path
  # More routes behind the same line and capacity (Advanced plan; refused without it).
  additional_routes = var.advanced_plan ? var.additional_routes : null

  total_active_users   = var.total_active_users
  new_users_per_minute = var.new_users_per_minute
  # Minutes, unlike drop.toml's duration strings.
  session_duration        = var.session_duration
  disable_session_renewal = var.advanced_plan ? var.disable_session_renewal : null

  queueing_method      = var.advanced_plan ? var.queueing_method : null
  queueing_status_code = var.queueing_status_code
  queue_all            = var.queue_all
  suspended            = var.suspended

  # Clients written for either variant poll the same JSON (Advanced plan).
  json_response_enabled     = var.advanced_plan
  custom_page_html          = var.advanced_plan ? file("${path.module}/../waiting.html") : null
  default_template_language = var.default_template_language

  # Always written: left out, the provider turns on an invisible challenge (its default).
  turnstile_mode   = var.turnstile_mode
  turnstile_action = var.turnstile_action

  cookie_suffix = var.cookie_suffix == "" ? null : var.cookie_suffix
  cookie_attributes = {
    samesite = var.cookie_samesite
    secure   = var.cookie_secure
  }

  enabled_origin_commands = var.enabled_origin_commands
}

resource "cloudflare_waiting_room_event" "drop" {
  count = length(var.events)

  zone_id         = var.zone_id
  waiting_room_id = cloudflare_waiting_room.room.id

  name                   = var.events[count.index].name
  description            = var.events[count.index].description
  prequeue_start_time    = var.events[count.index].prequeue_start_time
  event_start_time       = var.events[count.index].event_start_time
  event_end_time         = var.events[count.index].event_end_time
  shuffle_at_event_start = var.events[count.index].shuffle_at_event_start
  suspended              = var.events[count.index].suspended

  # Null inherits the room's value.
  total_active_users      = var.events[count.index].total_active_users
  new_users_per_minute    = var.events[count.index].new_users_per_minute
  session_duration        = var.events[count.index].session_duration
  disable_session_renewal = var.advanced_plan ? var.events[count.index].disable_session_renewal : null
  queueing_method         = var.advanced_plan ? var.events[count.index].queueing_method : null
  turnstile_mode          = var.events[count.index].turnstile_mode
  turnstile_action        = var.events[count.index].turnstile_action
}

resource "cloudflare_waiting_room_rules" "bypass" {
  # The provider wants at least one rule: no rules, no resource.
  count = length(var.bypass_rules) > 0 ? 1 : 0

  zone_id         = var.zone_id
  waiting_room_id = cloudflare_waiting_room.room.id

  rules = [for rule in var.bypass_rules : {
    action      = "bypass_waiting_room"
    expression  = rule.expression
    description = rule.description
    enabled     = rule.enabled
  }]
}
