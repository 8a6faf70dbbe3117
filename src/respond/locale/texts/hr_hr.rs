//! hr-HR.

use super::super::{FailureTexts, Forms, Texts, VisitorTexts};

pub(in crate::respond::locale) const TEXTS: Texts = Texts {
    heading: "U redu ste",
    message: "Trgovina je trenutačno vrlo zauzeta. Ostavite ovu karticu otvorenom: ući ćete automatski kad dođete na red.",
    closed_heading: "Ova prodaja je završena",
    closed_message: "Više nema ničega na što biste čekali. Hvala na interesu.",
    challenge_heading: "Trenutak, molimo",
    challenge_message: "Prije nego što zauzmete mjesto u redu, provjeravamo jeste li osoba. To se obično događa samo od sebe.",
    challenge_retry: "Provjera nije uspjela. Uskoro će krenuti ispočetka.",
    proof_message: "Prije nego što zauzmete mjesto u redu, vaš preglednik obavlja mali izračun koji drži botove podalje. Traje nekoliko sekundi.",
    proof_needs_script: "Ovaj red traži od vašeg preglednika mali izračun koji drži botove podalje: uključite JavaScript (preko HTTPS-a) i ponovno učitajte stranicu da biste se pridružili.",
    place_label: "Vaše mjesto u redu",
    number_before: "Vi ste broj",
    number_after: "u redu",
    waiting: Forms::other("osoba čeka")
        .one("osoba čeka")
        .few("osobe čekaju"),
    total: Forms::other("Ukupno čeka {n} osoba")
        .one("Ukupno čeka {n} osoba")
        .few("Ukupno čekaju {n} osobe"),
    random_note: "Posjetitelji ulaze nasumičnim redom, a ne redom dolaska.",
    progress_label: "Napredak prema početku reda",
    progress_value: "{pct}\u{a0}% puta do početka",
    estimated_wait: "Procijenjeno čekanje",
    last_updated: "Zadnje ažuriranje",
    not_known: "Još nije poznato",
    wait_note: "Još ne možemo procijeniti vaše čekanje. Procjena će se pojaviti ovdje čim se red počne kretati.",
    refresh_note: "Ponovnim učitavanjem ove stranice nećete izgubiti mjesto u redu.",
    starts_in: "Prodaja počinje za",
    prequeue_note: "U redu ste. Red će se pokrenuti kad prodaja počne.",
    prequeue_shuffle_note: "Svi koji se pridruže prije početka dobivaju nasumično mjesto na početku: nema potrebe za žurbom ni ponovnim učitavanjem.",
    live: "Ova se stranica ažurira automatski",
    offline: "Veza je prekinuta, ponovni pokušaj…",
    your_turn: "Vi ste na redu! Ulazite…",
    title_position: "Br. {n} u redu",
    footer: "Čekaonica: {room}",
    minutes: Forms::other("{n} minuta")
        .one("{n} minuta")
        .few("{n} minute"),
    range: "od {low} do {high}",
    failure: FailureTexts {
        kicker: "Pogreška {n}",
        retry: "Pokušaj ponovno",
        not_answering: "Trgovina trenutačno ne odgovara",
        place_kept: "Pokušajte ponovno za trenutak: vaše mjesto ili propusnica su sačuvani.",
        too_slow: "Trgovina predugo odgovara",
        too_slow_message: "Trgovina nije odgovorila na vrijeme. Pokušajte ponovno za trenutak.",
        went_wrong: "Nešto je pošlo po zlu",
        try_again: "Pokušajte ponovno za trenutak.",
        bad_request: "Neispravan zahtjev",
        bad_request_message: "Zahtjev nije bilo moguće razumjeti.",
        too_many_visitors: "Previše posjetitelja s vaše mreže",
        too_fast: "S vaše mrežne adrese u kratkom je vremenu došlo mnogo novih posjetitelja.",
        too_many_live: "Vaša mrežna adresa već zauzima mnogo mjesta u redu.",
        too_many_requests: "Previše zahtjeva s vašom propusnicom",
        pass_rate: "Vaša je propusnica u minuti zatražila više stranica nego što može jedna osoba.",
        retry_in: Forms::other("Stranica će pokušati ponovno za {n} sekundi.")
            .one("Stranica će pokušati ponovno za {n} sekundu.")
            .few("Stranica će pokušati ponovno za {n} sekunde."),
        shared: "Vaša je propusnica korištena s previše mjesta",
        shared_message: "Propusnica vrijedi za jednu osobu. Ova je korištena s više mreža nego što jedna osoba koristi u jednoj sesiji, pa je poništena posvuda. Ponovno učitajte stranicu da biste se vratili u red.",
        members_only: "Ovaj red je za prijavljene kupce",
        members_only_message: "Prijavite se u trgovinu, a zatim se vratite ovamo putem njezine poveznice da biste zauzeli mjesto u redu.",
        blocked: "Pristup ovoj stranici je blokiran",
        blocked_message: "Trgovina ne prihvaća ovakve zahtjeve. Ako mislite da je riječ o pogrešci, obratite se trgovini.",
    },
};

pub(in crate::respond::locale) const VISITOR: VisitorTexts = VisitorTexts {
    queue_id: "Vaš ID u redu",
    queue_id_note: "Navedite ga ako se obratite korisničkoj podršci trgovine.",
    leave: "Napusti red",
    leave_confirm: "Vaše mjesto prelazi sljedećoj osobi. Ako se ponovno pridružite, krećete od kraja.",
    leave_yes: "Da, napusti red",
    left_heading: "Napustili ste red",
    left_message: "Vaše mjesto prešlo je sljedećoj osobi. Hvala što ste napravili mjesta.",
    rejoin: "Ponovno stani na kraj reda",
    notify: "Obavijesti me kad dođem na red",
    notify_on: "Obavijestit ćemo vas kad dođete na red, čak i ako ste u drugoj kartici.",
    notify_title_only: "Ovaj preglednik ne dopušta obavijesti: naslov kartice promijenit će se kad dođete na red.",
    notify_sound: "Reproduciraj i zvuk",
    turn_title: "Vi ste na redu!",
    turn_body: "Vratite se na ovu karticu da uđete.",
};
