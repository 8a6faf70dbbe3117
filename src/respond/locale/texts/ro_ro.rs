//! ro-RO.

use super::super::{FailureTexts, Forms, Texts, VisitorTexts};

pub(in crate::respond::locale) const TEXTS: Texts = Texts {
    heading: "Sunteți la coadă",
    message: "Magazinul este foarte aglomerat acum. Lăsați această filă deschisă: veți intra automat când vă vine rândul.",
    closed_heading: "Această vânzare s-a încheiat",
    closed_message: "Nu mai este nimic pentru care să stați la coadă. Vă mulțumim pentru interes.",
    challenge_heading: "Un moment, vă rog",
    challenge_message: "Înainte să vă ocupați locul la coadă, verificăm că sunteți o persoană. De obicei se întâmplă de la sine.",
    challenge_retry: "Verificarea nu a reușit. Va reîncepe într-un moment.",
    proof_message: "Înainte să vă ocupați locul la coadă, browserul dvs. face un mic calcul care ține roboții departe. Durează câteva secunde.",
    proof_needs_script: "Această coadă îi cere browserului dvs. un mic calcul care ține roboții departe: activați JavaScript (prin HTTPS) și reîncărcați pagina pentru a intra.",
    place_label: "Locul dvs. la coadă",
    number_before: "Sunteți numărul",
    number_after: "la coadă",
    waiting: Forms::other("de persoane așteaptă")
        .one("persoană așteaptă")
        .few("persoane așteaptă"),
    total: Forms::other("{n} de persoane așteaptă în total")
        .one("{n} persoană așteaptă în total")
        .few("{n} persoane așteaptă în total"),
    random_note: "Vizitatorii intră în ordine aleatorie, nu în ordinea sosirii.",
    progress_label: "Progresul spre începutul cozii",
    progress_value: "{pct}\u{a0}% din drumul până în față",
    estimated_wait: "Așteptare estimată",
    last_updated: "Ultima actualizare",
    not_known: "Încă necunoscută",
    wait_note: "Încă nu putem estima cât veți aștepta. O estimare va apărea aici imediat ce coada începe să avanseze.",
    refresh_note: "Dacă reîncărcați pagina, nu vă pierdeți locul la coadă.",
    starts_in: "Vânzarea începe în",
    prequeue_note: "Sunteți la coadă. Va începe să avanseze când se deschide vânzarea.",
    prequeue_shuffle_note: "Toți cei care intră înainte de deschidere primesc la start un loc tras la sorți: nu trebuie să vă grăbiți sau să reîncărcați.",
    live: "Această pagină se actualizează automat",
    offline: "Conexiune pierdută, se reîncearcă…",
    your_turn: "Este rândul dvs.! Intrați…",
    title_position: "Nr. {n} la coadă",
    footer: "Sală de așteptare: {room}",
    minutes: Forms::other("{n} de minute")
        .one("{n} minut")
        .few("{n} minute"),
    range: "între {low} și {high}",
    failure: FailureTexts {
        kicker: "Eroare {n}",
        retry: "Încercați din nou",
        not_answering: "Magazinul nu răspunde acum",
        place_kept: "Încercați din nou peste un moment: locul sau permisul dvs. se păstrează.",
        too_slow: "Magazinul răspunde prea greu",
        too_slow_message: "Magazinul nu a răspuns la timp. Încercați din nou peste un moment.",
        went_wrong: "Ceva nu a mers bine",
        try_again: "Încercați din nou peste un moment.",
        bad_request: "Cerere greșită",
        bad_request_message: "Cererea nu a putut fi înțeleasă.",
        too_many_visitors: "Prea mulți vizitatori din rețeaua dvs.",
        too_fast: "Din adresa dvs. de rețea au venit mulți vizitatori noi într-un timp scurt.",
        too_many_live: "Adresa dvs. de rețea ocupă deja multe locuri la coadă.",
        too_many_requests: "Prea multe cereri cu permisul dvs.",
        pass_rate: "Permisul dvs. a cerut într-un minut mai multe pagini decât poate o persoană.",
        retry_in: Forms::other("Pagina reîncearcă peste {n} de secunde.")
            .one("Pagina reîncearcă peste {n} secundă.")
            .few("Pagina reîncearcă peste {n} secunde."),
        shared: "Permisul dvs. a fost folosit din prea multe locuri",
        shared_message: "Un permis este pentru o persoană. Acesta a fost folosit din mai multe rețele decât folosește o persoană într-o sesiune, așa că a fost anulat peste tot. Reîncărcați pagina pentru a vă reașeza la coadă.",
        members_only: "Această coadă este pentru clienții autentificați",
        members_only_message: "Autentificați-vă în magazin, apoi reveniți aici prin linkul acestuia pentru a vă ocupa locul la coadă.",
        blocked: "Accesul la această pagină este blocat",
        blocked_message: "Magazinul nu acceptă cereri ca aceasta. Dacă credeți că este o greșeală, contactați magazinul.",
    },
};

pub(in crate::respond::locale) const VISITOR: VisitorTexts = VisitorTexts {
    queue_id: "ID-ul dumneavoastră la coadă",
    queue_id_note: "Menționați-l dacă contactați asistența magazinului.",
    leave: "Părăsiți coada",
    leave_confirm: "Locul dumneavoastră trece la următoarea persoană. Dacă reveniți, începeți de la capătul cozii.",
    leave_yes: "Da, părăsesc coada",
    left_heading: "Ați părăsit coada",
    left_message: "Locul dumneavoastră a trecut la următoarea persoană. Vă mulțumim că ați făcut loc.",
    rejoin: "Reveniți la coadă, la capăt",
    notify: "Anunțați-mă când îmi vine rândul",
    notify_on: "Vă anunțăm când vă vine rândul, chiar dacă sunteți în altă filă.",
    notify_title_only: "Acest browser nu permite notificări: titlul filei se va schimba când vă vine rândul.",
    notify_sound: "Redă și un sunet",
    turn_title: "Este rândul dumneavoastră!",
    turn_body: "Reveniți la această filă pentru a intra.",
};
