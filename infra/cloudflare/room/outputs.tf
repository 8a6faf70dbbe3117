output "waiting_room_id" {
  description = "ID of the room, for the API and the dashboard."
  value       = cloudflare_waiting_room.room.id
}

output "route" {
  description = "What the room protects: host and path prefix."
  value       = "${var.host}${var.path}"
}

output "event_ids" {
  description = "ID of each scheduled drop, by name."
  value       = { for event in cloudflare_waiting_room_event.drop : event.name => event.id }
}

output "next_event_start_time" {
  description = "When the next scheduled drop starts, as Cloudflare reports it."
  value       = cloudflare_waiting_room.room.next_event_start_time
}

output "status_api" {
  description = "GET it with the API token for status, estimated_queued_users and estimated_total_active_users."
  value       = "https://api.cloudflare.com/client/v4/zones/${var.zone_id}/waiting_rooms/${cloudflare_waiting_room.room.id}/status"
}
