# Every knob of one managed room. The names follow drop.toml, which follows Cloudflare. The root
# module passes each room of its `rooms` map here (room_name is the map's key); a variable with a
# default is not nullable, so a room that leaves it out (null) gets the default written here, the
# one place it is written.
#
# Some validations compare two variables (advanced_plan with the settings it unlocks, the
# cookie's SameSite with its Secure): Terraform 1.9 or later (../versions.tf).

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

variable "room_name" {
  description = "Unique name of the room in the zone (drop.toml room.id)."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,64}$", var.room_name))
    error_message = "room_name may only hold letters, digits, '-' and '_' (Cloudflare's rule)."
  }
}

variable "description" {
  description = "Free text shown in the dashboard (drop.toml room.name)."
  type        = string
  default     = ""
  nullable    = false
}

variable "host" {
  description = "Hostname the room protects, without scheme, port or wildcard (drop.toml room.host)."
  type        = string

  validation {
    condition     = length(var.host) > 0 && !can(regex("[/:*\\s]", var.host))
    error_message = "host must be a bare hostname such as shop.example.com."
  }
}

variable "path" {
  description = "Case-sensitive path prefix the room protects (drop.toml room.path)."
  type        = string
  default     = "/"
  nullable    = false

  validation {
    condition     = startswith(var.path, "/") && !can(regex("[*?]", var.path))
    error_message = "path must start with '/' and hold no wildcard or query string."
  }
}

variable "total_active_users" {
  description = "Target number of active sessions on the route (drop.toml room.total_active_users)."
  type        = number

  validation {
    condition     = var.total_active_users >= 200 && floor(var.total_active_users) == var.total_active_users
    error_message = "total_active_users must be a whole number of at least 200: Cloudflare's minimum. A shop that needs less is better served by waitroom-proxy."
  }
}

variable "new_users_per_minute" {
  description = "Admissions per minute (drop.toml room.new_users_per_minute)."
  type        = number

  validation {
    condition     = var.new_users_per_minute >= 200 && floor(var.new_users_per_minute) == var.new_users_per_minute
    error_message = "new_users_per_minute must be a whole number of at least 200: Cloudflare's minimum. A shop that needs less is better served by waitroom-proxy."
  }
}

variable "session_duration" {
  description = "Minutes a session stays alive without a request (drop.toml room.session_duration, rounded)."
  type        = number
  default     = 5
  nullable    = false

  validation {
    condition     = var.session_duration >= 1 && var.session_duration <= 30 && floor(var.session_duration) == var.session_duration
    error_message = "session_duration must be a whole number of minutes from 1 to 30."
  }
}

variable "disable_session_renewal" {
  description = "true: a session is a fixed window from admission instead of sliding (Advanced plan)."
  type        = bool
  default     = false
  nullable    = false

  validation {
    condition     = var.advanced_plan || !var.disable_session_renewal
    error_message = "disable_session_renewal = true needs Cloudflare's Waiting Room Advanced plan: set advanced_plan = true if the zone has it."
  }
}

variable "queueing_method" {
  description = "fifo, random, passthrough or reject (all but fifo: Advanced plan)."
  type        = string
  default     = "fifo"
  nullable    = false

  validation {
    condition     = contains(["fifo", "random", "passthrough", "reject"], var.queueing_method)
    error_message = "queueing_method must be one of fifo, random, passthrough, reject."
  }

  validation {
    condition     = var.advanced_plan || var.queueing_method == "fifo"
    error_message = "a queueing_method other than fifo needs Cloudflare's Waiting Room Advanced plan: set advanced_plan = true if the zone has it."
  }
}

variable "queueing_status_code" {
  description = "HTTP status of the waiting page."
  type        = number
  default     = 200
  nullable    = false

  validation {
    condition     = contains([200, 202, 429], var.queueing_status_code)
    error_message = "queueing_status_code must be 200, 202 or 429."
  }
}

variable "queue_all" {
  description = "true: every new visitor queues and nobody new is let in."
  type        = bool
  default     = false
  nullable    = false
}

variable "suspended" {
  description = "true: the room is off and all traffic goes to the origin."
  type        = bool
  default     = false
  nullable    = false
}

variable "cookie_suffix" {
  description = "Suffix of Cloudflare's waiting-room cookie name (empty: none)."
  type        = string
  default     = ""
  nullable    = false

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]*$", var.cookie_suffix))
    error_message = "cookie_suffix may only hold letters, digits, '-' and '_'."
  }
}

variable "cookie_samesite" {
  description = "SameSite of the room's cookie: auto, lax, none or strict (drop.toml pass.cookie_samesite)."
  type        = string
  default     = "auto"
  nullable    = false

  validation {
    condition     = contains(["auto", "lax", "none", "strict"], var.cookie_samesite)
    error_message = "cookie_samesite must be one of auto, lax, none, strict."
  }

  validation {
    condition     = !(var.cookie_samesite == "none" && var.cookie_secure == "never")
    error_message = "cookie_samesite = \"none\" needs a Secure cookie: Cloudflare refuses it with cookie_secure = \"never\"."
  }
}

variable "cookie_secure" {
  description = "Secure attribute of the room's cookie: auto, always or never (drop.toml pass.cookie_secure)."
  type        = string
  default     = "auto"
  nullable    = false

  validation {
    condition     = contains(["auto", "always", "never"], var.cookie_secure)
    error_message = "cookie_secure must be one of auto, always, never."
  }
}

variable "default_template_language" {
  description = "Language of Cloudflare's built-in texts, one of the provider's 38 (drop.toml page.default_template_language)."
  type        = string
  default     = "en-US"
  nullable    = false

  validation {
    condition = contains([
      "en-US", "es-ES", "de-DE", "fr-FR", "it-IT", "ja-JP", "ko-KR", "pt-BR", "zh-CN",
      "zh-TW", "nl-NL", "pl-PL", "id-ID", "tr-TR", "ar-EG", "ru-RU", "fa-IR", "bg-BG",
      "hr-HR", "cs-CZ", "da-DK", "fi-FI", "lt-LT", "ms-MY", "nb-NO", "ro-RO", "el-GR",
      "he-IL", "hi-IN", "hu-HU", "sr-BA", "sk-SK", "sl-SI", "sv-SE", "tl-PH", "th-TH",
      "uk-UA", "vi-VN",
    ], var.default_template_language)
    error_message = "default_template_language must be one of the provider's 38 locales, spelt as it spells them: en-US, es-ES, de-DE, fr-FR, it-IT, ja-JP, ko-KR, pt-BR, zh-CN, zh-TW, nl-NL, pl-PL, id-ID, tr-TR, ar-EG, ru-RU, fa-IR, bg-BG, hr-HR, cs-CZ, da-DK, fi-FI, lt-LT, ms-MY, nb-NO, ro-RO, el-GR, he-IL, hi-IN, hu-HU, sr-BA, sk-SK, sl-SI, sv-SE, tl-PH, th-TH, uk-UA, vi-VN (not \"auto\")."
  }
}

variable "enabled_origin_commands" {
  description = "[\"revoke\"] lets the origin end a session with the Cf-Waiting-Room-Command: revoke header."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for command in var.enabled_origin_commands : command == "revoke"])
    error_message = "enabled_origin_commands may only hold \"revoke\"."
  }
}

variable "additional_routes" {
  description = "More host and path prefixes behind this room's line and capacity (drop.toml room.routes); Waiting Room Advanced plan."
  type = list(object({
    host = string
    path = optional(string, "/")
  }))
  default  = []
  nullable = false

  validation {
    condition     = var.advanced_plan || length(var.additional_routes) == 0
    error_message = "additional_routes needs Cloudflare's Waiting Room Advanced plan: set advanced_plan = true if the zone has it."
  }

  validation {
    condition     = alltrue([for route in var.additional_routes : startswith(route.path, "/")])
    error_message = "every additional route's path starts with '/'."
  }
}

variable "bypass_rules" {
  description = "Traffic that skips the room and is not counted: Cloudflare rule expressions (drop.toml room.bypass)."
  type = list(object({
    expression  = string
    description = optional(string, "")
    enabled     = optional(bool, true)
  }))
  default  = []
  nullable = false

  validation {
    condition     = alltrue([for rule in var.bypass_rules : length(trimspace(rule.expression)) > 0])
    error_message = "every bypass rule needs an expression."
  }
}

variable "events" {
  description = "Scheduled drops (at most 5, never overlapping): pre-queue, shuffle at start, and overrides of the room's settings while active."
  type = list(object({
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
  }))
  default  = []
  nullable = false

  validation {
    condition     = length(var.events) <= 5
    error_message = "Cloudflare allows at most 5 events per room."
  }

  validation {
    condition     = alltrue([for event in var.events : can(regex("^[A-Za-z0-9_-]{1,64}$", event.name))])
    error_message = "event names may only hold letters, digits, '-' and '_'."
  }

  validation {
    condition = alltrue([
      for event in var.events : try(timecmp(event.event_end_time, event.event_start_time) > 0, false)
    ])
    error_message = "every event needs RFC 3339 event_start_time and event_end_time, the end after the start."
  }

  validation {
    condition = alltrue([
      for event in var.events : event.prequeue_start_time == null ? !event.shuffle_at_event_start : try(timecmp(timeadd(event.prequeue_start_time, "5m"), event.event_start_time) <= 0, false)
    ])
    error_message = "prequeue_start_time must be RFC 3339 and at least 5 minutes before event_start_time (Cloudflare's rule); shuffle_at_event_start needs a pre-queue."
  }

  validation {
    condition = alltrue([
      for event in var.events : event.session_duration == null ? true : event.session_duration >= 1 && event.session_duration <= 30 && floor(event.session_duration) == event.session_duration
    ])
    error_message = "an event's session_duration must be a whole number of minutes from 1 to 30."
  }

  validation {
    condition = alltrue([
      for event in var.events : (event.total_active_users == null) == (event.new_users_per_minute == null)
    ])
    error_message = "an event overrides total_active_users and new_users_per_minute together or not at all."
  }

  validation {
    condition = alltrue([
      for event in var.events : event.queueing_method == null ? true : contains(["fifo", "random", "passthrough", "reject"], event.queueing_method)
    ])
    error_message = "an event's queueing_method must be one of fifo, random, passthrough, reject."
  }

  validation {
    condition = var.advanced_plan || alltrue([
      for event in var.events : (event.queueing_method == null || event.queueing_method == "fifo") && event.disable_session_renewal != true && (event.turnstile_mode == null || contains(["off", "invisible"], coalesce(event.turnstile_mode, "off"))) && (event.turnstile_action == null || event.turnstile_action == "log")
    ])
    error_message = "an event's queueing_method other than fifo, disable_session_renewal = true, a visible turnstile_mode or turnstile_action = \"infinite_queue\" needs Cloudflare's Waiting Room Advanced plan: set advanced_plan = true if the zone has it."
  }

  validation {
    condition = alltrue([
      for event in var.events : (event.turnstile_mode == null ? true : contains(["off", "invisible", "visible_non_interactive", "visible_managed"], event.turnstile_mode)) && (event.turnstile_action == null ? true : contains(["log", "infinite_queue"], event.turnstile_action))
    ])
    error_message = "turnstile_mode must be off, invisible, visible_non_interactive or visible_managed; turnstile_action log or infinite_queue."
  }
}

variable "turnstile_mode" {
  description = "Turnstile challenge on the waiting page: off, invisible, visible_non_interactive or visible_managed (drop.toml [turnstile] mode; no [turnstile]: off). The provider's own default is invisible. Visible modes: Advanced plan."
  type        = string
  default     = "off"
  nullable    = false

  validation {
    condition     = contains(["off", "invisible", "visible_non_interactive", "visible_managed"], var.turnstile_mode)
    error_message = "turnstile_mode must be one of off, invisible, visible_non_interactive, visible_managed."
  }

  validation {
    condition     = var.advanced_plan || contains(["off", "invisible"], var.turnstile_mode)
    error_message = "a turnstile_mode other than off or invisible needs Cloudflare's Waiting Room Advanced plan: set advanced_plan = true if the zone has it."
  }
}

variable "turnstile_action" {
  description = "What a failed challenge leads to: log (counted only) or infinite_queue (a line that never admits; Advanced plan). drop.toml [turnstile] action."
  type        = string
  default     = "log"
  nullable    = false

  validation {
    condition     = contains(["log", "infinite_queue"], var.turnstile_action)
    error_message = "turnstile_action must be log or infinite_queue."
  }

  validation {
    condition     = var.advanced_plan || var.turnstile_action == "log"
    error_message = "turnstile_action = \"infinite_queue\" needs Cloudflare's Waiting Room Advanced plan: set advanced_plan = true if the zone has it."
  }
}
