output "rooms" {
  description = "Each room by id: its Cloudflare ID, what it protects, its drops and its status API."
  value = { for id, room in module.room : id => {
    waiting_room_id       = room.waiting_room_id
    route                 = room.route
    event_ids             = room.event_ids
    next_event_start_time = room.next_event_start_time
    status_api            = room.status_api
  } }
}
