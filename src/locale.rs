//! The built-in pages in the visitor's language: the texts of each locale, the choice of a locale
//! (fixed, or from Accept-Language), and numbers and wait times written the locale's way.
//!
//! The JSON status keeps Cloudflare's English whatever the page language: clients parse it.

use std::sync::OnceLock;

use serde::Serialize;

use crate::core::estimate::{WaitEstimate, minutes_ceil};

/// The locales the built-in pages speak (Cloudflare's tags, a subset of its 38).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Locale {
    EnUs,
    EsEs,
    FrFr,
    DeDe,
    ItIt,
    JaJp,
    PtBr,
    ZhCn,
}

/// Every text of the waiting and closed pages in one language. `{n}`, `{pct}`, `{room}`, `{low}`
/// and `{high}` are placeholders filled in by the page (and by its script).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Texts {
    pub heading: &'static str,
    pub message: &'static str,
    pub closed_heading: &'static str,
    pub closed_message: &'static str,
    /// The bot challenge shown instead of a place (`[turnstile]`).
    pub challenge_heading: &'static str,
    pub challenge_message: &'static str,
    pub challenge_retry: &'static str,
    pub place_label: &'static str,
    pub number_before: &'static str,
    pub number_after: &'static str,
    /// After the count of waiting visitors under random queueing.
    pub waiting_one: &'static str,
    pub waiting_other: &'static str,
    pub total_one: &'static str,
    pub total_other: &'static str,
    pub random_note: &'static str,
    pub progress_label: &'static str,
    pub progress_value: &'static str,
    pub estimated_wait: &'static str,
    pub last_updated: &'static str,
    pub not_known: &'static str,
    pub wait_note: &'static str,
    pub refresh_note: &'static str,
    /// Before the countdown to an event's start (`{time}`: h:mm:ss).
    pub starts_in: &'static str,
    pub prequeue_note: &'static str,
    /// The pre-queue is shuffled at the start.
    pub prequeue_shuffle_note: &'static str,
    pub live: &'static str,
    pub offline: &'static str,
    pub your_turn: &'static str,
    pub title_position: &'static str,
    pub footer: &'static str,
    pub minute_one: &'static str,
    pub minute_other: &'static str,
    pub range: &'static str,
}

/// Whether 0 takes the singular (CLDR: French and Portuguese say "0 minute", "0 minuto").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plural {
    OneOnly,
    ZeroAndOne,
}

const EN_US: Texts = Texts {
    heading: "You're in line",
    message: "This shop is very busy right now. Keep this tab open: you will be let in \
              automatically when it's your turn.",
    closed_heading: "This drop is closed",
    closed_message: "There is nothing left to queue for. Thank you for your interest.",
    challenge_heading: "One moment, please",
    challenge_message: "Before you take your place in line, we check that you are a person. This usually happens by itself.",
    challenge_retry: "The check did not go through. It starts again in a moment.",
    place_label: "Your place in line",
    number_before: "You are number",
    number_after: "in line",
    waiting_one: "person is waiting",
    waiting_other: "people are waiting",
    total_one: "{n} person waiting in total",
    total_other: "{n} people waiting in total",
    random_note: "Visitors are let in at random, not in order of arrival.",
    progress_label: "Progress to the front of the line",
    progress_value: "{pct}% of the way to the front",
    estimated_wait: "Estimated wait",
    last_updated: "Last updated",
    not_known: "Not known yet",
    wait_note: "We can’t estimate your wait yet. An estimate will appear here as soon as the \
                line starts moving.",
    refresh_note: "Refreshing this page won’t lose your place in line.",
    starts_in: "The drop opens in",
    prequeue_note: "You are in line. It starts moving when the drop opens.",
    prequeue_shuffle_note: "Everyone who joins before the drop opens gets a random place at the start, so there is no need to hurry or to refresh.",
    live: "This page updates automatically",
    offline: "Connection lost, retrying…",
    your_turn: "It’s your turn! Taking you in…",
    title_position: "#{n} in line",
    footer: "Waiting room: {room}",
    minute_one: "{n} minute",
    minute_other: "{n} minutes",
    range: "{low} to {high}",
};

const ES_ES: Texts = Texts {
    heading: "Estás en la fila",
    message: "Esta tienda está muy solicitada en este momento. Mantén esta pestaña abierta: \
              entrarás automáticamente cuando llegue tu turno.",
    closed_heading: "Esta venta ha terminado",
    closed_message: "Ya no queda nada por lo que hacer fila. Gracias por tu interés.",
    challenge_heading: "Un momento, por favor",
    challenge_message: "Antes de ocupar tu lugar en la fila, comprobamos que eres una persona. Normalmente ocurre solo.",
    challenge_retry: "La comprobación no ha funcionado. Empezará de nuevo en un momento.",
    place_label: "Tu lugar en la fila",
    number_before: "Eres el número",
    number_after: "en la fila",
    waiting_one: "persona está esperando",
    waiting_other: "personas están esperando",
    total_one: "{n} persona esperando en total",
    total_other: "{n} personas esperando en total",
    random_note: "Los visitantes entran al azar, no por orden de llegada.",
    progress_label: "Avance hacia el principio de la fila",
    progress_value: "{pct} % del camino hasta el principio",
    estimated_wait: "Espera estimada",
    last_updated: "Última actualización",
    not_known: "Aún no se sabe",
    wait_note: "Todavía no podemos estimar tu espera. Aparecerá aquí en cuanto la fila empiece \
                a avanzar.",
    refresh_note: "Si recargas esta página, no perderás tu lugar en la fila.",
    starts_in: "El lanzamiento abre en",
    prequeue_note: "Ya estás en la fila. Empezará a avanzar cuando abra el lanzamiento.",
    prequeue_shuffle_note: "Todos los que entren antes de la apertura reciben un lugar al azar al empezar: no hace falta darse prisa ni recargar.",
    live: "Esta página se actualiza automáticamente",
    offline: "Conexión perdida, reintentando…",
    your_turn: "¡Es tu turno! Entrando…",
    title_position: "N.º {n} en la fila",
    footer: "Sala de espera: {room}",
    minute_one: "{n} minuto",
    minute_other: "{n} minutos",
    range: "entre {low} y {high}",
};

const FR_FR: Texts = Texts {
    heading: "Vous êtes dans la file",
    message: "Cette boutique est très sollicitée en ce moment. Gardez cet onglet ouvert\u{a0}: \
              vous entrerez automatiquement quand ce sera votre tour.",
    closed_heading: "Cette vente est terminée",
    closed_message: "Il n’y a plus rien à attendre. Merci de votre intérêt.",
    challenge_heading: "Un instant, s’il vous plaît",
    challenge_message: "Avant de prendre votre place dans la file, nous vérifions que vous êtes une personne. Cela se fait généralement tout seul.",
    challenge_retry: "La vérification n’a pas abouti. Elle recommence dans un instant.",
    place_label: "Votre place dans la file",
    number_before: "Vous êtes le numéro",
    number_after: "dans la file",
    waiting_one: "personne attend",
    waiting_other: "personnes attendent",
    total_one: "{n} personne en attente au total",
    total_other: "{n} personnes en attente au total",
    random_note: "Les visiteurs entrent au hasard, pas dans l’ordre d’arrivée.",
    progress_label: "Progression vers le début de la file",
    progress_value: "{pct}\u{a0}% du chemin parcouru",
    estimated_wait: "Attente estimée",
    last_updated: "Dernière mise à jour",
    not_known: "Pas encore connue",
    wait_note: "Nous ne pouvons pas encore estimer votre attente. Une estimation apparaîtra ici \
                dès que la file commencera à avancer.",
    refresh_note: "Actualiser cette page ne vous fera pas perdre votre place dans la file.",
    starts_in: "Ouverture dans",
    prequeue_note: "Vous êtes dans la file. Elle avancera à l’ouverture.",
    prequeue_shuffle_note: "Toutes les personnes arrivées avant l’ouverture reçoivent une place tirée au sort au départ\u{a0}: inutile de vous presser ou d’actualiser.",
    live: "Cette page se met à jour automatiquement",
    offline: "Connexion perdue, nouvelle tentative…",
    your_turn: "C’est votre tour\u{a0}! Entrée en cours…",
    title_position: "N°\u{a0}{n} dans la file",
    footer: "Salle d’attente\u{a0}: {room}",
    minute_one: "{n}\u{a0}minute",
    minute_other: "{n}\u{a0}minutes",
    range: "entre {low} et {high}",
};

const DE_DE: Texts = Texts {
    heading: "Sie sind in der Warteschlange",
    message: "Dieser Shop ist gerade sehr gefragt. Lassen Sie diesen Tab geöffnet: Sie werden \
              automatisch eingelassen, sobald Sie an der Reihe sind.",
    closed_heading: "Dieser Verkauf ist beendet",
    closed_message: "Es gibt nichts mehr, wofür Sie anstehen könnten. Vielen Dank für Ihr \
                     Interesse.",
    challenge_heading: "Einen Moment bitte",
    challenge_message: "Bevor Sie Ihren Platz in der Warteschlange erhalten, prüfen wir, dass Sie ein Mensch sind. Das geschieht meist von selbst.",
    challenge_retry: "Die Prüfung hat nicht geklappt. Sie beginnt gleich von vorn.",
    place_label: "Ihr Platz in der Warteschlange",
    number_before: "Sie sind Nummer",
    number_after: "in der Warteschlange",
    waiting_one: "Person wartet",
    waiting_other: "Personen warten",
    total_one: "{n} Person wartet insgesamt",
    total_other: "{n} Personen warten insgesamt",
    random_note: "Besucher werden in zufälliger Reihenfolge eingelassen, nicht nach Ankunft.",
    progress_label: "Fortschritt bis zum Anfang der Warteschlange",
    progress_value: "{pct}\u{a0}% des Weges nach vorn",
    estimated_wait: "Geschätzte Wartezeit",
    last_updated: "Zuletzt aktualisiert",
    not_known: "Noch unbekannt",
    wait_note: "Wir können Ihre Wartezeit noch nicht schätzen. Eine Schätzung erscheint hier, \
                sobald sich die Warteschlange bewegt.",
    refresh_note: "Wenn Sie diese Seite neu laden, verlieren Sie Ihren Platz nicht.",
    starts_in: "Start in",
    prequeue_note: "Sie sind in der Warteschlange. Sie bewegt sich, sobald der Verkauf startet.",
    prequeue_shuffle_note: "Alle, die vor dem Start kommen, erhalten zum Start einen zufälligen Platz: Eile oder Neuladen bringt nichts.",
    live: "Diese Seite aktualisiert sich automatisch",
    offline: "Verbindung unterbrochen, neuer Versuch…",
    your_turn: "Sie sind an der Reihe! Sie werden eingelassen…",
    title_position: "Nr. {n} in der Warteschlange",
    footer: "Warteraum: {room}",
    minute_one: "{n} Minute",
    minute_other: "{n} Minuten",
    range: "{low} bis {high}",
};

const IT_IT: Texts = Texts {
    heading: "Sei in coda",
    message: "Questo negozio è molto affollato in questo momento. Tieni aperta questa scheda: \
              entrerai automaticamente quando sarà il tuo turno.",
    closed_heading: "Questa vendita è chiusa",
    closed_message: "Non c’è più nulla per cui fare la coda. Grazie per l’interesse.",
    challenge_heading: "Un momento, per favore",
    challenge_message: "Prima di prendere il tuo posto in coda, verifichiamo che tu sia una persona. Di solito avviene da sé.",
    challenge_retry: "La verifica non è andata a buon fine. Ripartirà tra un momento.",
    place_label: "Il tuo posto in coda",
    number_before: "Sei il numero",
    number_after: "in coda",
    waiting_one: "persona è in attesa",
    waiting_other: "persone sono in attesa",
    total_one: "{n} persona in attesa in totale",
    total_other: "{n} persone in attesa in totale",
    random_note: "I visitatori entrano in ordine casuale, non in ordine di arrivo.",
    progress_label: "Avanzamento verso l’inizio della coda",
    progress_value: "{pct}% del percorso verso l’inizio",
    estimated_wait: "Attesa stimata",
    last_updated: "Ultimo aggiornamento",
    not_known: "Non ancora nota",
    wait_note: "Non possiamo ancora stimare la tua attesa. Una stima comparirà qui appena la \
                coda inizierà a muoversi.",
    refresh_note: "Ricaricare questa pagina non ti farà perdere il posto in coda.",
    starts_in: "Apertura tra",
    prequeue_note: "Sei in coda. La coda si muoverà all’apertura.",
    prequeue_shuffle_note: "Chi arriva prima dell’apertura riceve un posto estratto a sorte all’inizio: non serve affrettarsi né ricaricare.",
    live: "Questa pagina si aggiorna automaticamente",
    offline: "Connessione persa, nuovo tentativo…",
    your_turn: "È il tuo turno! Ti stiamo facendo entrare…",
    title_position: "N. {n} in coda",
    footer: "Sala d’attesa: {room}",
    minute_one: "{n} minuto",
    minute_other: "{n} minuti",
    range: "da {low} a {high}",
};

const JA_JP: Texts = Texts {
    heading: "順番待ちをしています",
    message: "現在、ショップが大変混み合っています。このタブを開いたままお待ちください。\
              順番が来ると自動的に入場できます。",
    closed_heading: "この販売は終了しました",
    closed_message: "現在、順番待ちの対象はありません。ご関心をお寄せいただきありがとうございました。",
    challenge_heading: "少々お待ちください",
    challenge_message: "列に並ぶ前に、人間であることを確認します。通常は自動で完了します。",
    challenge_retry: "確認できませんでした。まもなく再度確認します。",
    place_label: "あなたの順番",
    number_before: "あなたの順番は",
    number_after: "番目です",
    waiting_one: "人が待っています",
    waiting_other: "人が待っています",
    total_one: "合計 {n} 人が待っています",
    total_other: "合計 {n} 人が待っています",
    random_note: "入場は到着順ではなく、ランダムに行われます。",
    progress_label: "列の先頭までの進み具合",
    progress_value: "先頭まで {pct}% 進みました",
    estimated_wait: "予想待ち時間",
    last_updated: "最終更新",
    not_known: "まだわかりません",
    wait_note: "待ち時間はまだ推定できません。列が動き始めるとここに表示されます。",
    refresh_note: "このページを再読み込みしても順番は失われません。",
    starts_in: "開始まで",
    prequeue_note: "列に並んでいます。開始と同時に列が進み始めます。",
    prequeue_shuffle_note: "開始前に並んだ方には、開始時に抽選で順番が割り当てられます。急いだり再読み込みしたりする必要はありません。",
    live: "このページは自動的に更新されます",
    offline: "接続が切れました。再試行しています…",
    your_turn: "順番が来ました！入場しています…",
    title_position: "{n} 番目",
    footer: "待合室：{room}",
    minute_one: "{n}分",
    minute_other: "{n}分",
    range: "{low}〜{high}",
};

const PT_BR: Texts = Texts {
    heading: "Você está na fila",
    message: "Esta loja está muito movimentada agora. Mantenha esta aba aberta: você entrará \
              automaticamente quando chegar a sua vez.",
    closed_heading: "Esta venda foi encerrada",
    closed_message: "Não há mais nada para esperar na fila. Obrigado pelo seu interesse.",
    challenge_heading: "Um momento, por favor",
    challenge_message: "Antes de você entrar na fila, verificamos que você é uma pessoa. Normalmente isso acontece sozinho.",
    challenge_retry: "A verificação não deu certo. Ela recomeça em instantes.",
    place_label: "Seu lugar na fila",
    number_before: "Você é o número",
    number_after: "na fila",
    waiting_one: "pessoa está esperando",
    waiting_other: "pessoas estão esperando",
    total_one: "{n} pessoa esperando no total",
    total_other: "{n} pessoas esperando no total",
    random_note: "Os visitantes entram de forma aleatória, não por ordem de chegada.",
    progress_label: "Progresso até o início da fila",
    progress_value: "{pct}% do caminho até o início",
    estimated_wait: "Espera estimada",
    last_updated: "Última atualização",
    not_known: "Ainda não se sabe",
    wait_note: "Ainda não conseguimos estimar sua espera. Uma estimativa aparecerá aqui assim \
                que a fila começar a andar.",
    refresh_note: "Atualizar esta página não fará você perder seu lugar na fila.",
    starts_in: "Abre em",
    prequeue_note: "Você está na fila. Ela começa a andar quando as vendas abrirem.",
    prequeue_shuffle_note: "Quem entrar antes da abertura recebe um lugar sorteado no início: não precisa se apressar nem recarregar.",
    live: "Esta página é atualizada automaticamente",
    offline: "Conexão perdida, tentando novamente…",
    your_turn: "Chegou a sua vez! Entrando…",
    title_position: "Nº {n} na fila",
    footer: "Sala de espera: {room}",
    minute_one: "{n} minuto",
    minute_other: "{n} minutos",
    range: "de {low} a {high}",
};

const ZH_CN: Texts = Texts {
    heading: "您正在排队",
    message: "本店当前访问量很大。请保持此标签页打开：轮到您时将自动进入。",
    closed_heading: "本次发售已结束",
    closed_message: "已没有可排队的商品。感谢您的关注。",
    challenge_heading: "请稍候",
    challenge_message: "在您排队之前，我们需要确认您是真人。这通常会自动完成。",
    challenge_retry: "验证未通过，稍后将重新开始。",
    place_label: "您的排队位置",
    number_before: "您排在第",
    number_after: "位",
    waiting_one: "人正在等待",
    waiting_other: "人正在等待",
    total_one: "共有 {n} 人在等待",
    total_other: "共有 {n} 人在等待",
    random_note: "访客将被随机放行，而不是按到达顺序。",
    progress_label: "到达队首的进度",
    progress_value: "已完成 {pct}%",
    estimated_wait: "预计等待时间",
    last_updated: "最后更新",
    not_known: "暂时未知",
    wait_note: "暂时无法估算您的等待时间。队伍开始移动后，这里将显示预计时间。",
    refresh_note: "刷新此页面不会丢失您的排队位置。",
    starts_in: "距离开始还有",
    prequeue_note: "您已在队列中。开始后队列将开始前进。",
    prequeue_shuffle_note: "开始前加入的所有人将在开始时随机分配位置，无需抢先或刷新。",
    live: "此页面会自动更新",
    offline: "连接已断开，正在重试…",
    your_turn: "轮到您了！正在进入…",
    title_position: "第 {n} 位",
    footer: "等候室：{room}",
    minute_one: "{n} 分钟",
    minute_other: "{n} 分钟",
    range: "{low}至{high}",
};

/// How a locale writes big numbers (CLDR).
struct Grouping {
    separator: &'static str,
    /// Spanish leaves four-digit numbers ungrouped ("1234" but "12.345").
    min_digits_to_group: usize,
}

impl Locale {
    pub const ALL: [Locale; 8] = [
        Locale::EnUs,
        Locale::EsEs,
        Locale::FrFr,
        Locale::DeDe,
        Locale::ItIt,
        Locale::JaJp,
        Locale::PtBr,
        Locale::ZhCn,
    ];

    pub fn tag(self) -> &'static str {
        match self {
            Locale::EnUs => "en-US",
            Locale::EsEs => "es-ES",
            Locale::FrFr => "fr-FR",
            Locale::DeDe => "de-DE",
            Locale::ItIt => "it-IT",
            Locale::JaJp => "ja-JP",
            Locale::PtBr => "pt-BR",
            Locale::ZhCn => "zh-CN",
        }
    }

    /// A tag exactly as Cloudflare spells it, in any case.
    pub fn from_tag(tag: &str) -> Option<Locale> {
        Self::ALL
            .into_iter()
            .find(|l| l.tag().eq_ignore_ascii_case(tag.trim()))
    }

    fn language(self) -> &'static str {
        self.tag().split('-').next().unwrap_or("en")
    }

    pub fn texts(self) -> &'static Texts {
        match self {
            Locale::EnUs => &EN_US,
            Locale::EsEs => &ES_ES,
            Locale::FrFr => &FR_FR,
            Locale::DeDe => &DE_DE,
            Locale::ItIt => &IT_IT,
            Locale::JaJp => &JA_JP,
            Locale::PtBr => &PT_BR,
            Locale::ZhCn => &ZH_CN,
        }
    }

    fn plural(self) -> Plural {
        match self {
            Locale::FrFr | Locale::PtBr => Plural::ZeroAndOne,
            _ => Plural::OneOnly,
        }
    }

    /// Whether `n` takes the singular form.
    pub fn is_singular(self, n: u64) -> bool {
        match self.plural() {
            Plural::OneOnly => n == 1,
            Plural::ZeroAndOne => n <= 1,
        }
    }

    /// The one or other form of a text, with `{n}` written the locale's way.
    pub fn count(self, n: u64, one: &str, other: &str) -> String {
        let form = if self.is_singular(n) { one } else { other };
        form.replace("{n}", &self.number(n))
    }

    fn grouping(self) -> Grouping {
        let (separator, min_digits_to_group) = match self {
            Locale::EnUs | Locale::JaJp | Locale::ZhCn => (",", 4),
            Locale::EsEs => (".", 5),
            Locale::DeDe | Locale::ItIt | Locale::PtBr => (".", 4),
            Locale::FrFr => ("\u{202f}", 4),
        };
        Grouping {
            separator,
            min_digits_to_group,
        }
    }

    /// A whole number with the locale's grouping: 1234567 is "1,234,567" in en-US, "1.234.567" in
    /// de-DE, "1 234 567" (narrow no-break spaces) in fr-FR.
    pub fn number(self, n: u64) -> String {
        let digits = n.to_string();
        let grouping = self.grouping();
        if digits.len() < grouping.min_digits_to_group {
            return digits;
        }
        let mut out = String::with_capacity(digits.len() * 2);
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push_str(grouping.separator);
            }
            out.push(c);
        }
        out
    }

    pub fn minutes(self, n: u64) -> String {
        let t = self.texts();
        self.count(n, t.minute_one, t.minute_other)
    }

    /// The wait in this language, or None when it is not known. In en-US this is exactly
    /// Cloudflare's `waitTimeFormatted` ("10 minutes", "5 minutes to 15 minutes").
    pub fn wait_text(self, estimate: &WaitEstimate) -> Option<String> {
        match *estimate {
            WaitEstimate::Unknown => None,
            WaitEstimate::Exact { seconds } => Some(self.minutes(minutes_ceil(seconds))),
            WaitEstimate::Spread { p25, p75, .. } => {
                let (low, high) = (minutes_ceil(p25), minutes_ceil(p75));
                Some(if low == high {
                    self.minutes(low)
                } else {
                    self.texts()
                        .range
                        .replace("{low}", &self.minutes(low))
                        .replace("{high}", &self.minutes(high))
                })
            }
        }
    }

    /// `script_texts` as JSON, serialised once per locale.
    pub fn script_texts_json(self) -> &'static str {
        static JSON: OnceLock<Vec<String>> = OnceLock::new();
        let all = JSON.get_or_init(|| {
            Locale::ALL
                .iter()
                .map(|l| serde_json::to_string(&l.script_texts()).unwrap_or_default())
                .collect()
        });
        Locale::ALL
            .iter()
            .position(|l| *l == self)
            .and_then(|i| all.get(i))
            .map_or("{}", String::as_str)
    }

    /// What the page's script needs to write the same texts the server wrote.
    pub fn script_texts(self) -> ScriptTexts {
        ScriptTexts {
            locale: self.tag(),
            zero_is_singular: self.plural() == Plural::ZeroAndOne,
            texts: self.texts(),
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptTexts {
    pub locale: &'static str,
    pub zero_is_singular: bool,
    #[serde(flatten)]
    pub texts: &'static Texts,
}

/// `[page] default_template_language`: one locale for everyone, or the visitor's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageLanguage {
    Fixed(Locale),
    /// From Accept-Language, falling back to en-US (Cloudflare's default) when nothing matches.
    Auto,
}

pub const FALLBACK: Locale = Locale::EnUs;

impl PageLanguage {
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.trim().eq_ignore_ascii_case("auto") {
            return Ok(PageLanguage::Auto);
        }
        Locale::from_tag(text)
            .map(PageLanguage::Fixed)
            .ok_or_else(|| {
                let known: Vec<&str> = Locale::ALL.iter().map(|l| l.tag()).collect();
                format!("{text:?} is not \"auto\" or one of {}", known.join(", "))
            })
    }

    pub fn locale_for(self, accept_language: Option<&str>) -> Locale {
        match self {
            PageLanguage::Fixed(locale) => locale,
            PageLanguage::Auto => accept_language.and_then(negotiate).unwrap_or(FALLBACK),
        }
    }
}

/// The best of our locales for an Accept-Language header: the highest-weighted range that we
/// speak, an exact tag first, else the same language ("es-MX" gets es-ES, "pt" gets pt-BR).
/// Traditional Chinese is not answered with Simplified: it falls through to the next range.
pub fn negotiate(accept_language: &str) -> Option<Locale> {
    let mut ranges: Vec<(u16, usize, &str)> = accept_language
        .split(',')
        .enumerate()
        .filter_map(|(order, part)| {
            let mut pieces = part.split(';');
            let tag = pieces.next()?.trim();
            if tag.is_empty() {
                return None;
            }
            let weight = pieces
                .find_map(|p| {
                    let (name, value) = p.split_once('=')?;
                    name.trim().eq_ignore_ascii_case("q").then_some(value)
                })
                .map_or(1000, weight);
            (weight > 0).then_some((weight, order, tag))
        })
        .collect();
    // Highest weight first; equal weights keep the visitor's order.
    ranges.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    ranges.into_iter().find_map(|(_, _, tag)| match_range(tag))
}

/// A q-value (RFC 9110 12.4.2: 0 to 1, at most three decimals) in thousandths. A number above 1
/// counts as 1, so `q=5` cannot outrank a first choice, and decimals past the third are
/// dropped. Anything that is not a plain decimal number (`oops`, `-1`, `inf`, `1e3`) is 0: not
/// acceptable, the one reading that never ranks a range above those the visitor did weigh.
fn weight(q: &str) -> u16 {
    let q = q.trim();
    let (whole, fraction) = q.split_once('.').unwrap_or((q, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return 0;
    }
    if whole.bytes().any(|b| b != b'0') {
        return 1000;
    }
    fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0, |n, d| n * 10 + u16::from(d - b'0'))
}

fn match_range(range: &str) -> Option<Locale> {
    if let Some(exact) = Locale::from_tag(range) {
        return Some(exact);
    }
    let lower = range.to_ascii_lowercase();
    let language = lower.split(['-', '_']).next().unwrap_or("");
    if language == "zh" {
        let traditional = ["hant", "tw", "hk", "mo"]
            .iter()
            .any(|t| lower.split(['-', '_']).skip(1).any(|s| s == *t));
        return (!traditional).then_some(Locale::ZhCn);
    }
    Locale::ALL.into_iter().find(|l| l.language() == language)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_wait_texts_are_cloudflares() {
        let en = Locale::EnUs;
        assert_eq!(en.wait_text(&WaitEstimate::Unknown), None);
        assert_eq!(
            en.wait_text(&WaitEstimate::Exact { seconds: 30 })
                .as_deref(),
            Some("1 minute")
        );
        assert_eq!(
            en.wait_text(&WaitEstimate::Exact { seconds: 600 })
                .as_deref(),
            Some("10 minutes")
        );
        let spread = WaitEstimate::Spread {
            p25: 300,
            p50: 600,
            p75: 900,
        };
        assert_eq!(
            en.wait_text(&spread).as_deref(),
            Some("5 minutes to 15 minutes")
        );
    }

    #[test]
    fn every_locale_writes_waits_and_numbers_its_own_way() {
        let spread = WaitEstimate::Spread {
            p25: 300,
            p50: 600,
            p75: 900,
        };
        let cases = [
            (
                Locale::EnUs,
                "1,234,567",
                "1 minute",
                "5 minutes to 15 minutes",
            ),
            (
                Locale::EsEs,
                "1.234.567",
                "1 minuto",
                "entre 5 minutos y 15 minutos",
            ),
            (
                Locale::FrFr,
                "1\u{202f}234\u{202f}567",
                "1\u{a0}minute",
                "entre 5\u{a0}minutes et 15\u{a0}minutes",
            ),
            (
                Locale::DeDe,
                "1.234.567",
                "1 Minute",
                "5 Minuten bis 15 Minuten",
            ),
            (
                Locale::ItIt,
                "1.234.567",
                "1 minuto",
                "da 5 minuti a 15 minuti",
            ),
            (Locale::JaJp, "1,234,567", "1分", "5分〜15分"),
            (
                Locale::PtBr,
                "1.234.567",
                "1 minuto",
                "de 5 minutos a 15 minutos",
            ),
            (Locale::ZhCn, "1,234,567", "1 分钟", "5 分钟至15 分钟"),
        ];
        for (locale, big, one, range) in cases {
            assert_eq!(locale.number(1_234_567), big, "{locale:?}");
            assert_eq!(
                locale
                    .wait_text(&WaitEstimate::Exact { seconds: 45 })
                    .as_deref(),
                Some(one),
                "{locale:?}"
            );
            assert_eq!(
                locale.wait_text(&spread).as_deref(),
                Some(range),
                "{locale:?}"
            );
            assert_eq!(locale.number(999), "999");
        }
        assert_eq!(
            Locale::EsEs.number(1234),
            "1234",
            "CLDR: no grouping below 5 digits"
        );
        assert_eq!(Locale::EsEs.number(12_345), "12.345");
        assert_eq!(Locale::DeDe.number(1234), "1.234");
        assert_eq!(Locale::EnUs.minutes(0), "0 minutes");
        assert_eq!(Locale::FrFr.minutes(0), "0\u{a0}minute");
    }

    #[test]
    fn every_locale_has_every_text() {
        for locale in Locale::ALL {
            let json = serde_json::to_value(locale.script_texts()).unwrap_or_default();
            let map = json.as_object().cloned().unwrap_or_default();
            assert!(map.len() > 25, "{locale:?}");
            for (key, value) in &map {
                if let Some(text) = value.as_str() {
                    assert!(!text.trim().is_empty(), "{locale:?} {key}");
                }
            }
            let t = locale.texts();
            for (name, text, placeholder) in [
                ("total_one", t.total_one, "{n}"),
                ("total_other", t.total_other, "{n}"),
                ("progress_value", t.progress_value, "{pct}"),
                ("title_position", t.title_position, "{n}"),
                ("footer", t.footer, "{room}"),
                ("minute_one", t.minute_one, "{n}"),
                ("minute_other", t.minute_other, "{n}"),
                ("range", t.range, "{high}"),
                ("range", t.range, "{low}"),
            ] {
                assert!(text.contains(placeholder), "{locale:?} {name}");
            }
            if locale != Locale::EnUs {
                assert_ne!(t.heading, EN_US.heading, "{locale:?} is translated");
                assert_ne!(t.estimated_wait, EN_US.estimated_wait, "{locale:?}");
                assert_ne!(t.challenge_message, EN_US.challenge_message, "{locale:?}");
            }
        }
    }

    #[test]
    fn tags_parse_in_any_case() {
        assert_eq!(Locale::from_tag("fr-fr"), Some(Locale::FrFr));
        assert_eq!(Locale::from_tag("ZH-CN"), Some(Locale::ZhCn));
        assert_eq!(Locale::from_tag("fr"), None);
        assert_eq!(PageLanguage::parse("auto"), Ok(PageLanguage::Auto));
        assert_eq!(
            PageLanguage::parse("de-DE"),
            Ok(PageLanguage::Fixed(Locale::DeDe))
        );
        let error = PageLanguage::parse("ko-KR").err().unwrap_or_default();
        assert!(error.contains("\"ko-KR\""), "{error}");
        assert!(error.contains("pt-BR"), "{error}");
    }

    #[test]
    fn accept_language_picks_the_best_locale_we_speak() {
        assert_eq!(negotiate("fr-FR,fr;q=0.9,en;q=0.8"), Some(Locale::FrFr));
        assert_eq!(negotiate("es-MX"), Some(Locale::EsEs));
        assert_eq!(negotiate("pt"), Some(Locale::PtBr));
        assert_eq!(negotiate("pt-PT;q=0.5, de;q=0.9"), Some(Locale::DeDe));
        assert_eq!(negotiate("ko-KR, ja;q=0.3"), Some(Locale::JaJp));
        assert_eq!(negotiate("zh-TW, en;q=0.5"), Some(Locale::EnUs));
        assert_eq!(negotiate("zh-Hans-CN"), Some(Locale::ZhCn));
        assert_eq!(negotiate("zh"), Some(Locale::ZhCn));
        assert_eq!(negotiate("it;q=0, en;q=0.1"), Some(Locale::EnUs));
        assert_eq!(negotiate("*"), None);
        assert_eq!(negotiate(""), None);
        assert_eq!(negotiate("de;q=oops, it"), Some(Locale::ItIt));
        assert_eq!(negotiate("it;Q=0.2, de ; q = 0.3"), Some(Locale::DeDe));
        assert_eq!(PageLanguage::Auto.locale_for(Some("ko")), FALLBACK);
        assert_eq!(PageLanguage::Auto.locale_for(None), FALLBACK);
        assert_eq!(
            PageLanguage::Fixed(Locale::JaJp).locale_for(Some("de")),
            Locale::JaJp
        );
    }

    #[test]
    fn q_values_are_clamped_to_one_and_malformed_ones_are_not_acceptable() {
        // Above 1 counts as 1: order decides between equals.
        assert_eq!(negotiate("fr, de;q=5"), Some(Locale::FrFr));
        assert_eq!(negotiate("fr;q=1, de;q=1.5"), Some(Locale::FrFr));
        assert_eq!(negotiate("de;q=5, fr"), Some(Locale::DeDe));
        for malformed in ["inf", "NaN", "-1", "1e3", "", ".5", "0:5", "0.5x"] {
            assert_eq!(
                negotiate(&format!("de;q={malformed}, it;q=0.1")),
                Some(Locale::ItIt),
                "q={malformed}"
            );
        }
        for (q, thousandths) in [
            ("1", 1000),
            ("1.000", 1000),
            ("0.5", 500),
            ("0.125", 125),
            ("0.1239", 123),
            ("0", 0),
            ("0.000", 0),
            ("00.9", 900),
            (" 0.8 ", 800),
            ("2", 1000),
            ("10.5", 1000),
        ] {
            assert_eq!(weight(q), thousandths, "q={q}");
        }
    }
}
