# The zone and its rooms. `waitroom-proxy export-terraform --config drop.toml` writes `rooms`
# (one entry per room of drop.toml, keyed by its id) and the zone-wide settings, all but zone_id
# (and advanced_plan, which it sets to true only when drop.toml uses what needs it).
#
# Each room's knobs, their defaults and their validations are room/variables.tf's: the type of
# `rooms` below only names them (tests/terraform.rs keeps the two equal). A knob a room leaves out
# gets the default written there.

variable "advanced_plan" {
  description = "true when the zone has Cloudflare's Waiting Room Advanced plan: only then are json_response_enabled, custom_page_html (waiting.html), a queueing_method other than fifo, disable_session_renewal, a visible turnstile_mode and turnstile_action = infinite_queue sent; without it the API refuses them."
  type        = bool
  default     = false
}

variable "zone_id" {
  description = "ID of the Cloudflare zone that holds the shop's hostname (32 hexadecimal characters)."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-f]{32}$", var.zone_id))
    error_message = "zone_id must be the zone's 32-character hexadecimal ID (dashboard: Overview, API section)."
  }
}

variable "rooms" {
  description = "The rooms of the zone, by id (drop.toml [room] id or each [[rooms]] id): Cloudflare's name for the room, unique in the zone. Each matches its host and path prefix, as waitroom-proxy does."
  type = map(object({
    description               = optional(string)
    host                      = string
    path                      = optional(string)
    total_active_users        = number
    new_users_per_minute      = number
    session_duration          = optional(number)
    disable_session_renewal   = optional(bool)
    queueing_method           = optional(string)
    queueing_status_code      = optional(number)
    queue_all                 = optional(bool)
    suspended                 = optional(bool)
    cookie_suffix             = optional(string)
    cookie_samesite           = optional(string)
    cookie_secure             = optional(string)
    default_template_language = optional(string)
    enabled_origin_commands   = optional(list(string))
    additional_routes = optional(list(object({
      host = string
      path = optional(string, "/")
    })))
    bypass_rules = optional(list(object({
      expression  = string
      description = optional(string, "")
      enabled     = optional(bool, true)
    })))
    events = optional(list(object({
      name                    = string
      event_start_time        = string
      event_end_time          = string
      prequeue_start_time     = optional(string)
      shuffle_at_event_start  = optional(bool, false)
      description             = optional(string, "")
      suspended               = optional(bool, false)
      total_active_users      = optional(number)
      new_users_per_minute    = optional(number)
      session_duration        = optional(number)
      disable_session_renewal = optional(bool)
      queueing_method         = optional(string)
      turnstile_mode          = optional(string)
      turnstile_action        = optional(string)
    })))
    turnstile_mode   = optional(string)
    turnstile_action = optional(string)
  }))

  validation {
    condition     = length(var.rooms) > 0
    error_message = "rooms needs at least one room."
  }

  validation {
    condition     = alltrue([for id, room in var.rooms : can(regex("^[A-Za-z0-9_-]{1,64}$", id))])
    error_message = "a room's id (its key in rooms) may only hold letters, digits, '-' and '_' (Cloudflare's rule)."
  }

  validation {
    condition     = length(distinct([for room in var.rooms : "${room.host}${coalesce(room.path, "/")}"])) == length(var.rooms)
    error_message = "two rooms protect the same host and path: Cloudflare, like waitroom-proxy, refuses it."
  }
}

variable "search_engine_crawler_bypass" {
  description = "Zone-wide: let verified search-engine crawlers skip every waiting room of the zone, uncounted."
  type        = bool
  default     = false
}
