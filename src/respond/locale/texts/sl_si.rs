//! sl-SI.

use super::super::{FailureTexts, Forms, Texts, VisitorTexts};

pub(in crate::respond::locale) const TEXTS: Texts = Texts {
    heading: "V vrsti ste",
    message: "V trgovini je trenutno velika gneča. Pustite ta zavihek odprt: ko boste na vrsti, boste samodejno vstopili.",
    closed_heading: "Ta prodaja je končana",
    closed_message: "Ničesar ni več, za kar bi čakali. Hvala za vaše zanimanje.",
    challenge_heading: "Trenutek, prosim",
    challenge_message: "Preden dobite mesto v vrsti, preverimo, ali ste človek. Običajno se to zgodi samo od sebe.",
    challenge_retry: "Preverjanje ni uspelo. Čez trenutek se bo začelo znova.",
    proof_message: "Preden dobite mesto v vrsti, vaš brskalnik opravi majhen izračun, ki odganja robote. Traja nekaj sekund.",
    proof_needs_script: "Ta vrsta od vašega brskalnika zahteva majhen izračun, ki odganja robote: vklopite JavaScript (prek HTTPS) in znova naložite stran, da se pridružite.",
    place_label: "Vaše mesto v vrsti",
    number_before: "Ste številka",
    number_after: "v vrsti",
    waiting: Forms::other("oseb čaka")
        .one("oseba čaka")
        .two("osebi čakata")
        .few("osebe čakajo"),
    total: Forms::other("Skupaj čaka {n} oseb")
        .one("Skupaj čaka {n} oseba")
        .two("Skupaj čakata {n} osebi")
        .few("Skupaj čakajo {n} osebe"),
    random_note: "Obiskovalci vstopajo v naključnem vrstnem redu, ne po vrstnem redu prihoda.",
    progress_label: "Napredek do začetka vrste",
    progress_value: "{pct}\u{a0}% poti do začetka",
    estimated_wait: "Ocenjeno čakanje",
    last_updated: "Nazadnje posodobljeno",
    not_known: "Še ni znano",
    wait_note: "Vašega čakanja še ne moremo oceniti. Ocena se bo prikazala tukaj, ko se bo vrsta začela premikati.",
    refresh_note: "Če stran osvežite, ne boste izgubili mesta v vrsti.",
    starts_in: "Prodaja se začne čez",
    prequeue_note: "V vrsti ste. Začela se bo premikati, ko se prodaja odpre.",
    prequeue_shuffle_note: "Vsi, ki se pridružijo pred odprtjem, ob začetku dobijo naključno mesto: ni se treba muditi ali osveževati.",
    live: "Ta stran se samodejno posodablja",
    offline: "Povezava je prekinjena, poskušamo znova…",
    your_turn: "Na vrsti ste! Vstopate…",
    title_position: "Št. {n} v vrsti",
    footer: "Čakalnica: {room}",
    minutes: Forms::other("{n} minut")
        .one("{n} minuta")
        .two("{n} minuti")
        .few("{n} minute"),
    range: "od {low} do {high}",
    failure: FailureTexts {
        kicker: "Napaka {n}",
        retry: "Poskusi znova",
        not_answering: "Trgovina se trenutno ne odziva",
        place_kept: "Poskusite znova čez trenutek: vaše mesto ali prepustnica ostaneta ohranjena.",
        too_slow: "Trgovina se odziva predolgo",
        too_slow_message: "Trgovina ni odgovorila pravočasno. Poskusite znova čez trenutek.",
        went_wrong: "Nekaj je šlo narobe",
        try_again: "Poskusite znova čez trenutek.",
        bad_request: "Neveljavna zahteva",
        bad_request_message: "Zahteve ni bilo mogoče razumeti.",
        too_many_visitors: "Preveč obiskovalcev iz vašega omrežja",
        too_fast: "Z vašega omrežnega naslova je v kratkem času prišlo veliko novih obiskovalcev.",
        too_many_live: "Vaš omrežni naslov že zaseda veliko mest v vrsti.",
        too_many_requests: "Preveč zahtev z vašo prepustnico",
        pass_rate: "Vaša prepustnica je v minuti zahtevala več strani, kot jih zmore en človek.",
        retry_in: Forms::other("Stran bo poskusila znova čez {n} sekund.")
            .one("Stran bo poskusila znova čez {n} sekundo.")
            .two("Stran bo poskusila znova čez {n} sekundi.")
            .few("Stran bo poskusila znova čez {n} sekunde."),
        shared: "Vaša prepustnica je bila uporabljena s preveč mest",
        shared_message: "Prepustnica velja za eno osebo. Ta je bila uporabljena iz več omrežij, kot jih en človek uporabi v eni seji, zato je bila povsod preklicana. Znova naložite stran, da se vrnete v vrsto.",
        members_only: "Ta vrsta je za prijavljene stranke",
        members_only_message: "Prijavite se v trgovino in se nato prek njene povezave vrnite sem, da zasedete mesto v vrsti.",
        blocked: "Dostop do te strani je blokiran",
        blocked_message: "Trgovina ne sprejema takšnih zahtev. Če menite, da gre za napako, se obrnite na trgovino.",
    },
};

pub(in crate::respond::locale) const VISITOR: VisitorTexts = VisitorTexts {
    queue_id: "Vaš ID v vrsti",
    queue_id_note: "Navedite ga, če se obrnete na podporo trgovine.",
    leave: "Zapusti vrsto",
    leave_confirm: "Vaše mesto bo prešlo na naslednjo osebo. Če se znova pridružite, začnete na koncu.",
    leave_yes: "Da, zapusti vrsto",
    left_heading: "Zapustili ste vrsto",
    left_message: "Vaše mesto je prešlo na naslednjo osebo. Hvala, da ste naredili prostor.",
    rejoin: "Znova se postavi na konec vrste",
    notify: "Obvesti me, ko pridem na vrsto",
    notify_on: "Obvestili vas bomo, ko boste na vrsti, tudi če ste v drugem zavihku.",
    notify_title_only: "Ta brskalnik ne dovoli obvestil: naslov zavihka se bo spremenil, ko boste na vrsti.",
    notify_sound: "Predvajaj tudi zvok",
    turn_title: "Na vrsti ste!",
    turn_body: "Vrnite se v ta zavihek, da vstopite.",
};
